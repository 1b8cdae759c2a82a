"""Kernel-specific checks beyond the generic comparison: the vectorised exp, attention at long
sequences and with every kind of mask, and the registry's fallback rules."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from tinyformer import registry

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def vector_exp():
    from numba import njit, prange

    from tinyformer.kernels.numba._fastexp import exp_nonpositive
    from tinyformer.kernels.numba._rows import FASTMATH

    @njit(parallel=True, fastmath=FASTMATH)
    def apply(x, y):
        for i in prange(x.size):
            y[i] = exp_nonpositive(x[i])

    return apply


@pytest.mark.parametrize("dtype, ulps", [(np.float32, 3), (np.float64, 8)])
def test_fast_exp_is_accurate_and_exact_at_the_ends(vector_exp, dtype, ulps):
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.random(100_000) * 20, [0.0, -0.0, -1e-30, -np.inf]]).astype(dtype)
    y = np.empty_like(x)
    vector_exp(x, y)
    exact = np.exp(x.astype(np.float64))
    rel = np.abs(y - exact) / exact.clip(np.finfo(dtype).tiny)
    assert rel[np.isfinite(x)].max() < ulps * np.finfo(dtype).eps
    assert y[-1] == 0.0 and y[-4] == 1.0  # exp(-inf) = 0 exactly (masked attention needs it)
    deep = np.array([-1e4, math.log(np.finfo(dtype).tiny) - 1], dtype)
    vector_exp(deep, y[:2])
    assert (y[:2] == 0).all()


def test_gelu_kernels_float32_erfc_and_gaussian_are_accurate():
    # The float32 erfc is t exp(-a^2) Q(s) with a fitted polynomial Q (kernels/numba/gelu.py);
    # exp(-a^2) is returned as well, for the backward's Gaussian density.
    from numba import njit, prange

    from tinyformer.kernels.numba._rows import FASTMATH
    from tinyformer.kernels.numba.gelu import erfc_and_gauss

    @njit(parallel=True, fastmath=FASTMATH)
    def apply(z, tail, gauss):
        for i in prange(z.size):
            tail[i], gauss[i] = erfc_and_gauss(z[i])

    z = np.linspace(-9, 9, 180_001).astype(np.float32)
    tail, gauss = np.empty_like(z), np.empty_like(z)
    apply(z, tail, gauss)
    exact = np.array([math.erfc(v) for v in z.astype(np.float64)])
    assert (np.abs(tail - exact) / exact).max() < 5e-6
    exact_gauss = np.exp(-(z.astype(np.float64) ** 2))
    assert (np.abs(gauss - exact_gauss) / np.maximum(exact_gauss, 1e-30)).max() < 5e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_matches_numpy_with_infinities_nans_and_signed_zeros(dtype):
    # row_max maps each float to an integer that orders like it (kernels/numba/_rowmax.py)
    from numba import njit

    from tinyformer.kernels.numba._rowmax import row_max

    first_n = njit(lambda x, n: row_max(x, n))
    rng = np.random.default_rng(5)
    tiny, huge = np.finfo(dtype).tiny, np.finfo(dtype).max
    for trial in range(400):
        n = int(rng.integers(1, 70))
        x = (rng.standard_normal(n + 3) * 10.0 ** rng.integers(-30, 30)).astype(dtype)
        kind = trial % 8
        if kind == 1:
            x[rng.integers(0, n)] = np.inf
        elif kind == 2:
            x[:] = -np.inf
        elif kind == 3:  # a NaN of either sign, alone among -inf or among numbers
            x[: n if trial % 16 < 8 else 0] = -np.inf
            x[rng.integers(0, n)] = -np.nan if trial % 3 else np.nan
        elif kind == 4:
            x[:] = -np.abs(x)
        elif kind == 5:
            x[:] = 0.0
            x[rng.integers(0, n)] = -0.0
        elif kind == 6:
            x[:n] = rng.choice([tiny, -tiny, huge, -huge], n)
        got, want = first_n(x, n), np.max(x[:n])
        assert (np.isnan(got) and np.isnan(want)) or got == want, (x[:n], got, want)


def _attention(backend, q, k, v, mask, causal, gy):
    scale = 1 / math.sqrt(q.shape[-1])
    with registry.prefer(backend):
        y, lse = registry.call("attention.forward", q, k, v, mask, causal, scale)
        grads = registry.call("attention.backward", gy, q, k, v, y, lse, mask, causal, scale)
    return (y, *grads)


def _kernel_matches_reference(q, k, v, mask, gy):
    """Attention's Numba output and gradients equal the reference's, causal and not."""
    for causal in (False, True):
        got = _attention("numba", q, k, v, mask, causal, gy)
        want = _attention("numpy", q, k, v, mask, causal, gy)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


# Up to SHORT_KEYS keys the kernel runs one thread per (batch, head) pair in blocks of four
# query rows (odd row counts leave a partial block); longer key sequences go through the tiles.
@pytest.mark.parametrize(
    "tq, tk", [(67, 200), (201, 67), (256, 256), (1024, 1024), (1024, 700), (300, 1024)]
)
@pytest.mark.parametrize("mask_kind", [None, "padding", "float"])
def test_attention_kernel_matches_reference_on_both_paths(tq, tk, mask_kind):
    rng = np.random.default_rng(tq + tk)
    q = rng.standard_normal((1, 2, tq, 16))
    k, v = rng.standard_normal((2, 1, tk, 16)), rng.standard_normal((2, 2, tk, 12))
    gy = rng.standard_normal((2, 2, tq, 12))
    mask = None
    if mask_kind == "padding":  # (B, 1, 1, Tk): the last keys of batch 1 are padding
        mask = np.ones((2, 1, 1, tk), bool)
        mask[1, ..., tk // 2 :] = False
        mask = mask & (rng.random((2, 1, tq, 1)) > 0.05)  # and some queries see nothing at all
    elif mask_kind == "float":
        mask = rng.standard_normal((tq, tk))
    _kernel_matches_reference(q, k, v, mask, gy)


@pytest.mark.parametrize("layout", ["heads-last", "reversed", "rows-strided"])
def test_attention_kernel_reads_strided_inputs_and_odd_head_sizes(layout):
    # The short path reads each input as a flat buffer plus strides (attention.rows_of); head
    # sizes 7 and 5 leave a remainder after the products' four-term steps.
    rng = np.random.default_rng(7)
    b, h, t = 3, 2, 37

    def make(d):
        if layout == "heads-last":  # a (B, T, H, d) projection seen as (B, H, T, d), as in GPT
            return rng.standard_normal((b, t, h, d)).transpose(0, 2, 1, 3)
        if layout == "reversed":  # a negative stride: copied before the kernel reads it
            return rng.standard_normal((b, h, t, d))[:, :, ::-1]
        return rng.standard_normal((b, h, t, 2 * d))[..., ::2]  # rows not contiguous: copied

    q, k, v, gy = make(7), make(7), make(5), make(5)
    for causal in (False, True):
        got = _attention("numba", q, k, v, None, causal, gy)
        want = _attention("numpy", q, k, v, None, causal, gy)
        for a, c in zip(got, want):
            np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_attention_kernel_lays_outputs_out_like_its_inputs():
    # Q, K and V sliced out of one (B, T, 3, H, d) projection and seen as (B, H, T, d), as in a
    # transformer: the output comes back as (B, T, H, d) memory, so that the model's transpose
    # and reshape back to (B, T, C) copy nothing, and the gradients as the same slices of one
    # new array, so that split's backward need not concatenate them. Contiguous (B, H, T, d)
    # inputs get contiguous outputs.
    rng = np.random.default_rng(11)
    b, h, t, d = 2, 3, 21, 8
    qkv = rng.standard_normal((b, t, 3, h, d))
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    gy = rng.standard_normal((b, t, h, d)).transpose(0, 2, 1, 3)
    got = _attention("numba", q, k, v, None, True, gy)
    for a, c in zip(got, _attention("numpy", q, k, v, None, True, gy)):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)
    y, *grads = got
    assert y.transpose(0, 2, 1, 3).flags.c_contiguous
    whole = grads[0].base
    assert whole.shape == qkv.shape and all(g.base is whole for g in grads)
    assert [g.strides for g in grads] == [a.strides for a in (q, k, v)]
    for i, g in enumerate(grads):
        assert np.shares_memory(g, whole[:, :, i])
    plain = [np.ascontiguousarray(a) for a in (q, k, v, gy)]
    assert all(a.flags.c_contiguous for a in _attention("numba", *plain[:3], None, True, plain[3]))
    # Q and K the same slice: the gradients must not share memory (written one after the other)
    y, *grads = _attention("numba", q, q, v, None, True, gy)
    assert not any(np.shares_memory(a, c) for a, c in [grads[:2], grads[1:], grads[::2]])
    # Q, K and V interleaved element by element in one array: rows not contiguous, so the
    # gradients cannot mirror them (the kernels write rows as contiguous runs)
    mixed = rng.standard_normal((b, t, h, d, 3))
    q, k, v = (mixed[..., i].transpose(0, 2, 1, 3) for i in range(3))
    for a, c in zip(
        _attention("numba", q, k, v, None, True, gy), _attention("numpy", q, k, v, None, True, gy)
    ):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_self_attention_gradients_through_one_qkv_array(monkeypatch):
    # MultiheadAttention's c_attn -> split -> heads -> attention kernel: the kernel hands back
    # dQ, dK and dV as slices of one array, and split's backward returns that array uncopied.
    # Every gradient must equal the reference path's.
    import tinyformer as tf
    from tinyformer import nn

    split_op = importlib.import_module("tinyformer.ops.split")  # the module, not the function
    uncopied = []

    def spy(gys, axis, shape):
        whole = side_by_side(gys, axis, shape)
        uncopied.append(whole is not None)
        return whole

    side_by_side = split_op._side_by_side
    monkeypatch.setattr(split_op, "_side_by_side", spy)
    tf.manual_seed(4)
    mha = nn.MultiheadAttention(16, 4).to(np.float64)
    x = tf.randn(3, 10, 16, dtype=np.float64, requires_grad=True)
    grads = {}
    for backend in ("numba", "numpy"):
        with registry.prefer(backend):
            mha.zero_grad()
            x.grad = None
            (mha(x, is_causal=True) ** 2).sum().backward()
        grads[backend] = [x.grad, *(p.grad for p in mha.parameters())]
    assert uncopied == [True, False]  # the reference's gradients are three separate arrays
    for a, c in zip(*grads.values()):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_split_backward_joins_without_copying_only_pieces_side_by_side():
    side_by_side = importlib.import_module("tinyformer.ops.split")._side_by_side
    whole = np.arange(24.0).reshape(2, 3, 4)
    pieces = [whole[..., :1], whole[..., 1:3], whole[..., 3:]]
    joined = side_by_side(pieces, 2, (2, 3, 4))
    assert np.shares_memory(joined, whole) and np.array_equal(joined, whole)
    assert side_by_side(pieces[::-1], 2, (2, 3, 4)) is None  # out of order
    assert side_by_side([p.copy() for p in pieces], 2, (2, 3, 4)) is None  # separate arrays
    assert side_by_side([whole[:1], whole[1:]], 0, (2, 3, 4)) is not None
    assert side_by_side([whole[:, :1], whole[:, 1:]], 2, (2, 3, 4)) is None  # not along axis 2


@pytest.mark.parametrize(
    "batch, tq, tk, runs",
    [
        ((2, 1), 128, 128, "numba"),  # 2**15 scores, two pairs
        ((1, 2), 128, 127, "numpy"),  # one score short of 2**15
        ((1, 1), 256, 256, "numpy"),  # short keys, one pair: one thread against BLAS's two
        ((1, 1), 64, 512, "numba"),  # long keys: tiled, every core helps with one pair too
    ],
)
def test_attention_default_dispatch_follows_the_size_rule(batch, tq, tk, runs):
    q, k = np.zeros((*batch, tq, 8), np.float32), np.zeros((*batch, tk, 8), np.float32)
    assert registry.choose("attention.forward", q, k, k, None, False, 1.0).backend == runs


def test_missing_numba_falls_back_to_the_reference_silently(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "numba" else find_spec(name)
    )
    saved = {p: dict(impls) for p, impls in registry._table.items()}
    for impls in registry._table.values():
        impls.pop("numba", None)
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    registry._cache.clear()
    try:
        x = np.ones((2, 3), np.float32)
        assert registry.implementation("softmax.forward", x).backend == "numpy"
        assert "numba is not installed" in registry.explain("softmax.forward")
    finally:
        registry._table.update(saved)
        registry._cache.clear()


def test_a_broken_kernel_file_is_raised_loudly(tmp_path, monkeypatch):
    import tinyformer.kernels.numba as package

    (tmp_path / "broken.py").write_text("raise RuntimeError('syntax of the future')\n")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    with pytest.raises(RuntimeError, match="syntax of the future"):
        registry.implementation("softmax.forward", np.ones(2))
    monkeypatch.undo()
    registry._cache.clear()


@pytest.mark.parametrize("d, dv", [(128, 128), (129, 8), (8, 129), (5, 3)])
def test_attention_kernel_head_sizes_on_both_paths(d, dv):
    # The short kernel's scratch rows hold up to SHORT_HEAD (128) features; larger heads go
    # through the tiles. Head sizes that are not a multiple of 4 leave a remainder of terms.
    from tinyformer.kernels.numba import attention as kernel_module

    rng = np.random.default_rng(d * 1000 + dv)
    q, k = rng.standard_normal((2, 3, 21, d)), rng.standard_normal((2, 3, 21, d))
    v, gy = rng.standard_normal((2, 3, 21, dv)), rng.standard_normal((2, 3, 21, dv))
    assert kernel_module.short(q, k, v) == (max(d, dv) <= 128)
    _kernel_matches_reference(q, k, v, None, gy)


def test_attention_kernels_compile_once_for_read_only_and_writeable_inputs():
    # Numba types read-only arrays (broadcast_to views, many gradients) apart from writeable
    # ones; the wrappers pass every input as read-only so that a mix compiles no new variant.
    from tinyformer.kernels.numba import _attention_short as short

    rng = np.random.default_rng(3)
    q, k, v, gy = (rng.standard_normal((2, 2, 9, 4)) for _ in range(4))
    _attention("numba", q, k, v, None, True, gy)
    counts = len(short.pairs_forward.signatures), len(short.pairs_backward.signatures)
    frozen = [np.broadcast_to(a, a.shape) for a in (q, k, v, gy)]  # read-only views
    got = _attention("numba", *frozen[:3], None, True, frozen[3])
    assert (len(short.pairs_forward.signatures), len(short.pairs_backward.signatures)) == counts
    for a, c in zip(got, _attention("numpy", q, k, v, None, True, gy)):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def _compare_forward_and_backward(op, x, w, b, args, tol=1e-10):
    """op's Numba forward and backward equal the reference's, for a fixed gy of x's dtype;
    returns the Numba results (y, gx, gw, gb)."""
    results = {}
    for backend in ("numba", "numpy"):
        with registry.prefer(backend):
            y = registry.call(f"{op}.forward", x, w, b, *args)
            gy = np.cos(np.arange(y.size)).reshape(y.shape).astype(x.dtype)
            results[backend] = (y, *registry.call(f"{op}.backward", gy, x, w, *args))
    for got, want in zip(results["numba"], results["numpy"]):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
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
    tol = 1e-5 if dtype == np.float32 else 1e-12
    with threadpool_limits(limits=1, user_api="blas"):
        assert _stamps_tile(x, w, *args)
        assert not _stamps_tile(x[:1], w, *args) or numba.get_num_threads() == 1
        got = _compare_forward_and_backward("conv_transpose2d", x, w, b, args, tol)
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


# linear's kernel splits each product's rows over Numba's workers, with BLAS on one thread in
# each: the registry picks it only when BLAS is single-threaded (as `tinyformer train` sets).
def test_linear_kernel_is_chosen_only_with_single_threaded_blas():
    x, w = np.zeros((64, 8), np.float32), np.zeros((5, 8), np.float32)
    registry.choose("linear.forward", x, w, None)  # loads the BLAS Numba calls, to limit it too
    with threadpool_limits(limits=1, user_api="blas"):
        assert registry.choose("linear.forward", x, w, None).backend == "numba"
        assert registry.choose("linear.forward", x[:63], w, None).backend == "numpy"  # small
    with threadpool_limits(limits=2, user_api="blas"):
        assert registry.choose("linear.forward", x, w, None).backend == "numpy"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)])
def test_linear_kernel_matches_reference_over_uneven_row_blocks(dtype, needs):
    rng = np.random.default_rng(len(needs))
    x, w = rng.standard_normal((131, 37)).astype(dtype), rng.standard_normal((19, 37)).astype(dtype)
    b, gy = rng.standard_normal(19).astype(dtype), rng.standard_normal((131, 19)).astype(dtype)
    x_strided = np.repeat(x, 2, axis=1)[:, ::2]  # not contiguous: the kernel copies it
    tol = 1e-4 if dtype == np.float32 else 1e-12
    with threadpool_limits(limits=1, user_api="blas"):
        results = []
        for backend in ("numba", "numpy"):
            with registry.prefer(backend):
                y = registry.call("linear.forward", x_strided, w, b)
                grads = registry.call("linear.backward", gy, x_strided, w, *needs)
            results.append((y, *grads))
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if got is not None:
            assert got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# In a fresh process SciPy's BLAS, the one the kernels call, is not loaded until a kernel needs
# it: the bench's one-thread wrapper must load it first, or it limits only NumPy's BLAS and the
# transposed conv's kernel is timed on its other path.
def test_bench_one_blas_thread_reaches_the_blas_kernels_call_in_a_fresh_process():
    import os
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from tinyformer.bench.kernels import _on_one_blas_thread
from tinyformer.kernels.numba.conv_transpose2d import _stamps_tile
assert "scipy.linalg.cython_blas" not in sys.modules
x, w = np.ones((4, 3, 5, 5), np.float32), np.ones((3, 2, 2, 2), np.float32)
print(_on_one_blas_thread(lambda: _stamps_tile(x, w, (2, 2), (0, 0), (0, 0), (1, 1), 1))())
"""
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}  # a batch of 4 splits over the workers
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"  # the per-image BLAS products would run


# The bench times kernels that call BLAS from their workers with BLAS on one thread, as training
# runs them, and must give the threads back after each call, even one that raises: the next
# reference timed would run on one thread otherwise.
def test_bench_runs_blas_calling_kernels_on_one_blas_thread_and_restores_it():
    from tinyformer.bench.kernels import _on_one_blas_thread
    from tinyformer.kernels.numba._blas import blas_one_thread

    blas_one_thread()  # loads the BLAS Numba calls, so that the limits below reach it too
    seen = []

    def fails():
        seen.append(blas_one_thread())
        raise RuntimeError("kernel failed")

    with threadpool_limits(limits=2, user_api="blas"):
        run = _on_one_blas_thread(lambda: seen.append(blas_one_thread()) or "result")
        assert run() == "result"
        assert not blas_one_thread()  # given back
        with pytest.raises(RuntimeError, match="kernel failed"):
            _on_one_blas_thread(fails)()
        assert not blas_one_thread()
    assert seen == [True, True]
