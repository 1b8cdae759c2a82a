"""A4's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself: it gets a `tf` whose `tf.nn.functional` and `tf.ops` are the
student's, run in the task's child process, and raises AssertionError on failure. `PROPERTIES`
and `HIDDEN` map a task id to its tests.

The references here are direct loops over output pixels, as the op files' docstrings write the
math, at sizes where loops are instant. A test of one op never calls another graded op (the
adjoint identity <conv2d(x), y> = <x, conv_transpose2d(y)> would tie A4.1 to A4.2; unpooling
tests build their indices by hand rather than with max_pool2d), so each task is graded alone.
Gradients of the linear ops are checked against the loops too: the gradient of <f(x), gy> with
respect to x, one basis vector at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]


def _leaf(tf: ModuleType, a: np.ndarray):
    return tf.Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _rand(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def _loop_conv2d(x, w, b, stride, padding, dilation, groups) -> np.ndarray:
    """y[n, o, r, s] = b[o] + sum_{c,i,j} w[o, c, i, j] x_pad[n, G(o) + c, r sh + i dh, ...]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, ho, wo))
    for oc in range(o):
        first = oc // (o // groups) * cg
        for r in range(ho):
            for s in range(wo):
                rows, cols = r * sh + dh * np.arange(kh), s * sw + dw * np.arange(kw)
                patch = xp[:, first : first + cg][:, :, rows][:, :, :, cols]
                y[:, oc, r, s] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return y if b is None else y + b[:, None, None]


def _loop_conv_transpose2d(x, w, b, stride, padding, output_padding, dilation, groups):
    """Each input pixel stamps the kernel, scaled by its value; then the padding is cropped."""
    n, ci, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    hf, wf = (h - 1) * sh + dh * (kh - 1) + 1 + oph, (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, groups * cog, hf, wf))
    for c in range(ci):
        out = c // (ci // groups) * cog
        for r in range(h):
            for s in range(wd):
                for i in range(kh):
                    for j in range(kw):
                        stamp = x[:, c, r, s, None] * w[c, :, i, j]  # (N, Co/g)
                        full[:, out : out + cog, r * sh + i * dh, s * sw + j * dw] += stamp
    y = full[:, :, ph : hf - ph, pw : wf - pw]
    return y if b is None else y + b[:, None, None]


def _vjp(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """d<f(x), gy>/dx for a linear f, one basis vector at a time."""
    g = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = 1.0
        g[i] = (f(e.reshape(x.shape)) * gy).sum()
    return g.reshape(x.shape)


def _check_linear_op(tf, op, loop, x, w, b, **kw) -> None:
    """op's forward and its gradients for x, w and b against the loop's."""
    xs, ws, bs = _leaf(tf, x), _leaf(tf, w), _leaf(tf, b)
    y = op(xs, ws, bs, **kw)
    params = list(kw.values())  # given in the loop's argument order
    np.testing.assert_allclose(y.data, loop(x, w, b, *params), atol=1e-12)
    gy = _rand(9, *y.shape)
    gx, gw, gb = tf.grad(y, [xs, ws, bs], gy)
    np.testing.assert_allclose(gx, _vjp(lambda e: loop(e, w, None, *params), x, gy), atol=1e-10)
    np.testing.assert_allclose(gw, _vjp(lambda e: loop(x, e, None, *params), w, gy), atol=1e-10)
    np.testing.assert_allclose(gb, gy.sum(axis=(0, 2, 3)), atol=1e-12)


def conv2d_matches_a_direct_loop(tf: ModuleType) -> None:
    """A padded 3x3 convolution, forward and gradients, against the sum that defines it."""
    F = tf.nn.functional

    x, w, b = _rand(0, 2, 2, 5, 4), _rand(1, 3, 2, 3, 3), _rand(2, 3)
    kw = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    _check_linear_op(tf, F.conv2d, _loop_conv2d, x, w, b, **kw)


def conv_transpose2d_matches_stamping(tf: ModuleType) -> None:
    """Stride 2 (the upsampling case) with padding 1, forward and gradients, against stamps."""
    F = tf.nn.functional

    x, w, b = _rand(3, 1, 2, 3, 3), _rand(4, 2, 3, 3, 3), _rand(5, 3)
    kw = dict(stride=(2, 2), padding=(1, 1), output_padding=(1, 1), dilation=(1, 1), groups=1)
    _check_linear_op(tf, F.conv_transpose2d, _loop_conv_transpose2d, x, w, b, **kw)


def _loop_max_pool(x: np.ndarray, k: int, stride: int, padding: int, dilation: int):
    """Window maxima and the flat position h W + w of each (first maximum wins)."""
    n, c, h, wd = x.shape
    ho = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    wo = (wd + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    y, where = np.zeros((n, c, ho, wo)), np.zeros((n, c, ho, wo), dtype=np.int64)
    for r in range(ho):
        for s in range(wo):
            best = np.full((n, c), -np.inf)
            for i in range(k):
                for j in range(k):
                    hh, ww = (
                        r * stride + i * dilation - padding,
                        s * stride + j * dilation - padding,
                    )
                    if 0 <= hh < h and 0 <= ww < wd:
                        better = x[:, :, hh, ww] > best
                        best = np.where(better, x[:, :, hh, ww], best)
                        where[:, :, r, s] = np.where(better, hh * wd + ww, where[:, :, r, s])
            y[:, :, r, s] = best
    return y, where


def _check_pool(tf: ModuleType, x: np.ndarray, k: int, stride: int, padding: int, dilation: int):
    F = tf.nn.functional

    xs = _leaf(tf, x)
    y, indices = F.max_pool2d(xs, k, stride, padding, dilation, return_indices=True)
    want_y, want_i = _loop_max_pool(x, k, stride, padding, dilation)
    np.testing.assert_allclose(y.data, want_y, atol=0)
    np.testing.assert_array_equal(indices.data, want_i)
    gy = _rand(7, *y.shape)
    (gx,) = tf.grad(y, [xs], gy)
    expected = np.zeros_like(x).reshape(*x.shape[:2], -1)
    for n in range(x.shape[0]):  # overlapping windows that chose one element add up
        for c in range(x.shape[1]):
            np.add.at(expected[n, c], want_i[n, c].ravel(), gy[n, c].ravel())
    np.testing.assert_allclose(gx, expected.reshape(x.shape), atol=1e-12)


def max_pool2d_overlapping_windows(tf: ModuleType) -> None:
    """3x3 windows at stride 1 overlap: values, indices and gradients against a loop."""
    x = np.random.default_rng(0).permutation(2 * 3 * 6 * 5).reshape(2, 3, 6, 5) / 10.0
    _check_pool(tf, x, 3, 1, 0, 1)


def _check_unpool(tf: ModuleType, indices: np.ndarray, out_hw: tuple[int, int], k: int) -> None:
    F = tf.nn.functional

    x = _rand(8, *indices.shape)
    xs = _leaf(tf, x)
    y = F.max_unpool2d(xs, indices, k, output_size=out_hw)
    n, c = indices.shape[:2]
    expected = np.zeros((n, c, out_hw[0] * out_hw[1]))
    for i in np.ndindex(indices.shape):  # every index here is distinct within its plane
        expected[i[0], i[1], indices[i]] = x[i]
    np.testing.assert_allclose(y.data, expected.reshape(y.shape), atol=0)
    gy = _rand(9, *y.shape)
    (gx,) = tf.grad(y, [xs], gy)
    gathered = np.take_along_axis(gy.reshape(n, c, -1), indices.reshape(n, c, -1), axis=2)
    np.testing.assert_allclose(gx, gathered.reshape(x.shape), atol=0)


def max_unpool2d_scatters_and_gathers(tf: ModuleType) -> None:
    """Hand-made indices (one per 2x2 window): values go there, zeros elsewhere; gradients are
    read back from the same places."""
    rng = np.random.default_rng(1)
    rows, cols = np.arange(2)[:, None] * 2, np.arange(3)[None, :] * 2  # window corners, 4x6 grid
    taps = rng.integers(0, 2, (2, 2, 2, 3)), rng.integers(0, 2, (2, 2, 2, 3))
    indices = ((rows + taps[0]) * 6 + cols + taps[1]).astype(np.int64)
    _check_unpool(tf, indices, (4, 6), 2)


PROPERTIES = {
    "A4.1": [conv2d_matches_a_direct_loop],
    "A4.2": [conv_transpose2d_matches_stamping],
    "A4.3": [max_pool2d_overlapping_windows],
    "A4.4": [max_unpool2d_scatters_and_gathers],
}


### BEGIN HIDDEN TESTS A4
def _drawn(tf: ModuleType) -> int:
    """A seed from the test's generator (the grading secret's when grading)."""
    return int(tf.rng.integers(2**31))


def conv2d_strided_dilated_grouped(tf: ModuleType) -> None:
    F = tf.nn.functional

    x, w, b = _rand(_drawn(tf), 1, 4, 7, 6), _rand(_drawn(tf), 4, 2, 2, 3), _rand(_drawn(tf), 4)
    kw = dict(stride=(2, 1), padding=(0, 2), dilation=(2, 1), groups=2)
    _check_linear_op(tf, F.conv2d, _loop_conv2d, x, w, b, **kw)


def conv_transpose2d_grouped_dilated(tf: ModuleType) -> None:
    F = tf.nn.functional

    x, w, b = _rand(_drawn(tf), 1, 4, 2, 3), _rand(_drawn(tf), 4, 1, 2, 2), _rand(_drawn(tf), 2)
    kw = dict(stride=(1, 2), padding=(0, 1), output_padding=(0, 1), dilation=(2, 1), groups=2)
    _check_linear_op(tf, F.conv_transpose2d, _loop_conv_transpose2d, x, w, b, **kw)


def max_pool2d_padded_negative_dilated(tf: ModuleType) -> None:
    """All values negative: zero padding would win every border window; -inf never does."""
    x = -1.0 - tf.rng.permutation(1 * 2 * 7 * 6).reshape(1, 2, 7, 6) / 10.0
    _check_pool(tf, x, 3, 2, 1, 1)
    _check_pool(tf, x, 2, 1, 0, 2)


def max_unpool2d_other_output_size(tf: ModuleType) -> None:
    """An odd input (5x7) pooled by 2 unpools to an explicit output_size, not to 4x6."""
    rng = tf.rng
    rows, cols = np.arange(2)[:, None] * 2, np.arange(3)[None, :] * 2
    taps = rng.integers(0, 2, (1, 3, 2, 3)), rng.integers(0, 2, (1, 3, 2, 3))
    indices = ((rows + taps[0]) * 7 + cols + taps[1]).astype(np.int64)
    _check_unpool(tf, indices, (5, 7), 2)


HIDDEN = {
    "A4.1": [conv2d_strided_dilated_grouped],
    "A4.2": [conv_transpose2d_grouped_dilated],
    "A4.3": [max_pool2d_padded_negative_dilated],
    "A4.4": [max_unpool2d_other_output_size],
}
### END HIDDEN TESTS
