"""The conv family's and pooling's Numba kernels against their references, on shapes chosen to
reach every loop and remainder in them, and the rules that say where the registry picks them."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from tinyformer import registry

numba = pytest.importorskip("numba")


def _compare_forward_and_backward(op, x, w, b, args):
    """op's Numba forward and backward equal the reference's, for a fixed gy of x's dtype;
    returns the Numba results (y, gx, gw, gb).

    Every output is a sum of products, which the kernel adds in another order than the reference
    (and BLAS in another order on each CPU: 144-term float32 sums differed by 2e-5 on an Intel
    Xeon, where they agree to 1e-5 on our AMD machine). So each element may differ by a few
    rounding errors of its terms: 32 machine epsilons of the sum of their absolute values. That
    sum is the reference run on |x|, |w|, |b| and |gy|, since the op is linear in each of them.
    A wrong term or a dropped one is off by the size of a term, which is far more."""
    results = {}
    for backend in ("numba", "numpy"):
        with registry.prefer(backend):
            y = registry.call(f"{op}.forward", x, w, b, *args)
            gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(x.dtype)
            results[backend] = (y, *registry.call(f"{op}.backward", gy, x, w, *args))
    with registry.prefer("numpy"):
        absolute = abs(x), abs(w), None if b is None else abs(b)
        scales = (
            registry.call(f"{op}.forward", *absolute, *args),
            *registry.call(f"{op}.backward", abs(gy), *absolute[:2], *args),
        )
    names = ("y", "gx", "gw", "gb")
    for name, got, want, scale in zip(names, results["numba"], results["numpy"], scales):
        if want is None:
            assert got is None, f"{op}: the kernel returned {name}, the reference did not"
            continue
        assert got.shape == want.shape
        err = np.abs(got.astype(np.float64) - want)
        allowed = 32 * np.finfo(x.dtype).eps * scale
        worst = tuple(int(i) for i in np.unravel_index(np.argmax(err - allowed), err.shape))
        assert np.all(err <= allowed), (
            f"{op} {name}{list(worst)}: numba {got[worst]:.8g}, numpy {want[worst]:.8g}; "
            f"|difference| {err[worst]:.3g} > {allowed[worst]:.3g} (32 eps x sum of the "
            f"|terms| {scale[worst]:.3g})"
        )
    return results["numba"]


# The conv2d kernel works on runs of 512 grid positions, 4 output channels and 4 taps at a time,
# over all images laid one after the other: these shapes span several runs, leave partial
# channel blocks (5 and 2 per group) and tap remainders (27 and 3 taps), pad, dilate and group
# unevenly, have runs that cross from image to image (many small images), padding wider
# than the kernel's reach (the output is then larger than the image plus one side's padding),
# and a run that starts inside a row's two padding columns (7 + 2 = 9 wide, 512 % 9 = 8), so
# that row holds none of the run's outputs.
@pytest.mark.parametrize(
    "x_shape, w_shape, padding, dilation, groups",
    [
        ((2, 3, 30, 25), (5, 3, 3, 3), (1, 1), (1, 1), 1),
        ((3, 4, 19, 23), (10, 2, 2, 3), (2, 0), (2, 1), 2),
        ((1, 3, 40, 17), (6, 1, 1, 3), (0, 3), (1, 3), 3),
        ((37, 2, 5, 4), (3, 2, 3, 3), (1, 1), (1, 1), 1),
        ((9, 2, 5, 4), (3, 2, 1, 2), (2, 3), (1, 2), 1),
        ((16, 3, 7, 7), (4, 3, 5, 5), (2, 2), (1, 1), 1),
    ],
)
def test_conv2d_kernel_matches_reference_over_several_runs(
    x_shape, w_shape, padding, dilation, groups
):
    rng = np.random.default_rng(sum(x_shape))
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[0])
    args = ((1, 1), padding, dilation, groups)
    _compare_forward_and_backward("conv2d", x, w, b, args)


# On small images, with one group and BLAS on one thread (as in training), the conv2d kernel runs
# BLAS products one image at a time instead (_conv2d_images.py): padding wider than the kernel's
# reach, dilation, 1xk and 5x5 kernels, one input channel, a batch that splits unevenly over the
# workers, no bias, and an input that is a strided view.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "channels, w_shape, padding, dilation, bias",
    [
        (16, (32, 16, 3, 3), (1, 1), (1, 1), True),
        (1, (5, 1, 3, 3), (1, 1), (1, 1), False),
        (3, (4, 3, 3, 2), (2, 0), (1, 2), True),
        (2, (3, 2, 1, 2), (2, 3), (1, 2), True),
        (3, (4, 3, 5, 5), (2, 2), (1, 1), False),
    ],
)
def test_conv2d_per_image_products_match_reference(
    dtype, channels, w_shape, padding, dilation, bias
):
    from tinyformer.kernels.numba._blas import blas_one_thread
    from tinyformer.kernels.numba._conv2d_images import per_image

    blas_one_thread()  # loads the BLAS Numba calls, so that the limit below reaches it too
    rng = np.random.default_rng(sum(w_shape))
    batch = numba.get_num_threads() + 1
    x = rng.standard_normal((batch, channels, 14, 9)).astype(dtype)[:, :, ::2, :7]  # 7x7 images
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype) if bias else None
    args = ((1, 1), padding, dilation, 1)
    with threadpool_limits(limits=1, user_api="blas"):
        assert per_image(x, w, padding, dilation, 1)
        assert not per_image(x[:1], w, padding, dilation, 1) or numba.get_num_threads() == 1
        got = _compare_forward_and_backward("conv2d", x, w, b, args)
    with threadpool_limits(limits=2, user_api="blas"):
        assert not per_image(x, w, padding, dilation, 1)  # BLAS's own threads: the grid loops
    assert all(a.dtype == dtype for a in got if a is not None)


def test_conv2d_per_image_products_only_on_small_images_and_one_group():
    from tinyformer.kernels.numba._blas import blas_one_thread
    from tinyformer.kernels.numba._conv2d_images import per_image

    blas_one_thread()
    batch = numba.get_num_threads()  # an image for every worker (8 were too few on 16 cores)
    x, w = np.zeros((batch, 4, 20, 20), np.float32), np.zeros((4, 4, 3, 3), np.float32)
    same = ((1, 1), (1, 1))
    with threadpool_limits(limits=1, user_api="blas"):
        assert per_image(x, w, *same, 1)  # 20 rows of 21 grid positions
        assert not per_image(np.zeros((batch, 4, 24, 24), np.float32), w, *same, 1)
        assert not per_image(x, w[:, :2], *same, 2)
        assert not per_image(x[:-1], w, *same, 1) or batch == 1  # a worker would have none


def test_conv2d_kernel_is_chosen_for_stride_one_only():
    x, w = np.zeros((1, 2, 8, 8), np.float32), np.zeros((4, 2, 3, 3), np.float32)
    rest = ((0, 0), (1, 1), 1)
    assert registry.choose("conv2d.forward", x, w, None, (1, 1), *rest).backend == "numba"
    assert registry.choose("conv2d.forward", x, w, None, (2, 1), *rest).backend == "numpy"


# conv_transpose2d's kernel covers strides whose stamps do not overlap (U-Net's 2x2 / 2): with
# cropping padding, output_padding (pixels no tap reaches get the bias alone), stride 3 with a
# 2-wide kernel (gaps between stamps), dilation, and groups.
@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding, output_padding, dilation, groups",
    [
        ((2, 6, 9, 11), (6, 5, 2, 2), (2, 2), (0, 0), (0, 0), (1, 1), 1),
        ((2, 4, 5, 6), (4, 3, 2, 3), (2, 3), (1, 1), (1, 2), (1, 1), 2),
        ((3, 2, 3, 5), (2, 5, 2, 2), (3, 3), (1, 0), (0, 2), (2, 1), 1),
    ],
)
def test_conv_transpose2d_kernel_matches_reference(
    x_shape, w_shape, stride, padding, output_padding, dilation, groups
):
    rng = np.random.default_rng(sum(x_shape))
    x, w = rng.standard_normal(x_shape), rng.standard_normal(w_shape)
    b = rng.standard_normal(w_shape[1] * groups)
    args = (stride, padding, output_padding, dilation, groups)
    _compare_forward_and_backward("conv_transpose2d", x, w, b, args)


def test_conv_transpose2d_kernel_is_chosen_where_stamps_do_not_overlap():
    x = np.zeros((1, 2, 8, 8), np.float32)
    rest = ((0, 0), (0, 0), (1, 1), 1)

    def chosen(kernel, stride):
        w = np.zeros((2, 4, kernel, kernel), np.float32)
        return registry.choose("conv_transpose2d.forward", x, w, None, stride, *rest).backend

    assert chosen(2, (2, 2)) == "numba"
    assert chosen(3, (2, 2)) == "numpy"  # 3-wide stamps 2 apart overlap
    assert chosen(3, (1, 1)) == "numpy"


# With kernel = stride, no padding and BLAS on one thread (as in training), the kernel runs one
# BLAS product per image from each worker instead: kernels 2x2, 2x3 and 3x3, images whose sizes
# are not multiples of anything, a batch that splits unevenly over the workers, a channel count
# not a multiple of 4, and an input that is a strided view.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", [(2, 2), (2, 3), (3, 3)])
def test_conv_transpose2d_per_image_products_match_reference(dtype, kernel):
    from tinyformer.kernels.numba._blas import blas_one_thread
    from tinyformer.kernels.numba.conv_transpose2d import _stamps_tile

    blas_one_thread()  # loads the BLAS Numba calls, so that the limit below reaches it too
    rng = np.random.default_rng(kernel[1])
    batch = numba.get_num_threads() + 1
    x = rng.standard_normal((batch, 5, 14, 9)).astype(dtype)[:, :, ::2, :7]  # (B, 5, 7, 7)
    w, b = rng.standard_normal((5, 3, *kernel)).astype(dtype), rng.standard_normal(3)
    args = (kernel, (0, 0), (0, 0), (1, 1), 1)
    with threadpool_limits(limits=1, user_api="blas"):
        assert _stamps_tile(x, w, *args)
        assert not _stamps_tile(x[:1], w, *args) or numba.get_num_threads() == 1
        got = _compare_forward_and_backward("conv_transpose2d", x, w, b, args)
    with threadpool_limits(limits=2, user_api="blas"):
        assert not _stamps_tile(x, w, *args)  # BLAS's own threads: the phase loops run
    assert all(a.dtype == dtype for a in got)


# The pooling kernels have a loop of their own for 2x2 windows with stride 2 (MaxPool2d(2),
# AvgPool2d(2)) beside the general one: odd image sizes (a last row and column no window
# covers), ties (small integers: the first maximum in the window wins, as in the reference), and
# the neighbours of that case (padding, dilation, 3-row windows, stride 1, 3-wide windows 3
# apart) that must take the general loop.
POOLS = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1)),
    ((2, 3, 9, 7), (2, 2), (2, 2), (0, 0), (1, 1)),
    ((2, 3, 9, 7), (2, 2), (2, 2), (1, 1), (1, 1)),
    ((2, 3, 9, 9), (2, 2), (2, 2), (0, 0), (2, 2)),
    ((2, 3, 9, 7), (3, 2), (2, 2), (0, 0), (1, 1)),
    ((1, 2, 7, 6), (2, 2), (1, 1), (0, 0), (1, 1)),
    ((1, 2, 9, 10), (3, 3), (3, 3), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, kernel, stride, padding, dilation", POOLS)
def test_pooling_kernels_match_references(x_shape, kernel, stride, padding, dilation, dtype):
    rng = np.random.default_rng(sum(x_shape))
    x = rng.integers(-2, 3, x_shape).astype(dtype)  # ties in most windows
    tol = 1e-6 if dtype == np.float32 else 1e-12
    results = {}
    for backend in ("numba", "numpy"):
        with registry.prefer(backend):
            y, indices = registry.call("max_pool2d.forward", x, kernel, stride, padding, dilation)
            gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(dtype)
            gx = registry.call("max_pool2d.backward", gy, indices, x.shape)
            results[backend] = [y, indices, gx]
            if dilation == (1, 1):  # avg_pool2d has none; both divisor rules
                for include_pad in (True, False):
                    args = (kernel, stride, padding, include_pad)
                    a = registry.call("avg_pool2d.forward", x, *args)
                    ga = registry.call("avg_pool2d.backward", gy, x.shape, *args)
                    results[backend] += [a, ga]
    for got, want in zip(results["numba"], results["numpy"], strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
