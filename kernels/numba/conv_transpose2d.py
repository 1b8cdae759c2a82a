"""Numba kernels for conv_transpose2d when the stamps do not overlap: the upsampling of U-Nets
(kernel = stride, e.g. 2x2 with stride 2), and any stride with dilation (k - 1) < stride.

Then every output pixel receives at most one kernel tap, so the op splits into phases. Tap
(i, j) of output channel o is a 1x1 convolution of the input, a plain sum over input
channels, written to the pixels (r sh + i dh - ph, q sw + j dw - pw):
    P[n, (o, i, j), r, q] = sum_c w[c, o, i, j] x[n, c, r, q]
    y[n, o, r sh + i dh - ph, q sw + j dw - pw] = b[o] + P[n, (o, i, j), r, q]
The product is conv2d's kernel (`_correlate`, four (o, i, j) rows by four input channels per
pass) with one tap per channel and no shift; `_place` then scatters the phases into the output
(pixels no tap reaches, e.g. output_padding's, get the bias alone).

Backward gathers gy back into phases, G[n, (o, i, j), r, q] = gy at the pixel P went to (0 if
cropped), and then both gradients are again conv2d's loops: gx[c] = sum_(o,i,j) w[c, (o,i,j)]
G[(o,i,j)] (`_correlate`), gw[c, (o,i,j)] = sum_n sum_pixels x[n, c] G[n, (o,i,j)]
(`_weight_grad`). Overlapping stamps (stride 1 with a 3x3 kernel, say) run the reference.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, read_only
from tinyformer.kernels.numba.conv2d import RUN, _blocks, _correlate, _grid, _taps, _weight_grad
from tinyformer.ops.conv_transpose2d import conv_transpose2d_backward as reference_backward
from tinyformer.ops.conv_transpose2d import conv_transpose2d_forward as reference_forward
from tinyformer.registry import kernel


def _apart(w, stride, dilation) -> bool:
    return all(d * (k - 1) < s for k, s, d in zip(w.shape[2:], stride, dilation))


def stamps_apart(x, w, b, stride, padding, output_padding, dilation, groups) -> bool:
    """the kernel's stamps do not overlap: dilation (k - 1) < stride on both axes"""
    return _apart(w, stride, dilation)


def stamps_apart_backward(gy, x, w, stride, padding, output_padding, dilation, groups) -> bool:
    """the kernel's stamps do not overlap: dilation (k - 1) < stride on both axes"""
    return _apart(w, stride, dilation)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _place(phases, bias, kh, kw, sh, sw, dh, dw, ph, pw, covered, y):
    """y[n, o, r sh + i dh - ph, q sw + j dw - pw] = bias[o] + phases[n, (o, i, j), r, q], the
    pixels inside y; the rest of y is the bias (skipped when every pixel is `covered`)."""
    n, co, ho, wo = y.shape
    h, w = phases.shape[2], phases.shape[3]
    for plane in prange(n * co):
        img, o = plane // co, plane % co
        dst, b = y[img, o], bias[o]
        if not covered:
            dst[:, :] = b
        for i in range(kh):
            for j in range(kw):
                src = phases[img, (o * kh + i) * kw + j]
                for r in range(h):
                    row = r * sh + i * dh - ph
                    if 0 <= row < ho:
                        for q in range(w):
                            col = q * sw + j * dw - pw
                            if 0 <= col < wo:
                                dst[row, col] = b + src[r, q]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _gather(gy, kh, kw, sh, sw, dh, dw, ph, pw, phases, sums):
    """phases[(o, i, j), n, r, q] = gy[n, o, r sh + i dh - ph, q sw + j dw - pw], 0 off gy;
    sums[n, o] = the sum of gy's plane (for gb)."""
    n, co, ho, wo = gy.shape
    h, w = phases.shape[2], phases.shape[3]
    zero = phases.dtype.type(0)
    for plane in prange(n * co):
        img, o = plane // co, plane % co
        src = gy[img, o]
        sums[img, o] = src.sum()
        for i in range(kh):
            for j in range(kw):
                dst = phases[(o * kh + i) * kw + j, img]
                for r in range(h):
                    row = r * sh + i * dh - ph
                    for q in range(w):
                        col = q * sw + j * dw - pw
                        inside = 0 <= row < ho and 0 <= col < wo
                        dst[r, q] = src[row, col] if inside else zero


def _covered(h, k, s, p, op, d, out) -> bool:
    """every output row (or column) is some tap's pixel: the taps fill each stride (k d = s
    with d = 1 means k = s) and the output ends where the stamps do."""
    return d == 1 and k == s and (h - 1) * s + k - p >= out


@kernel("conv_transpose2d.forward", backend="numba", dtypes=FLOATS, when=stamps_apart)
def conv_transpose2d_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    if not _apart(w, stride, dilation):
        return reference_forward(x, w, b, stride, padding, output_padding, dilation, groups)
    n, ci, h, width = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    ho = (h - 1) * sh + dh * (kh - 1) + 1 + oph - 2 * ph
    wo = (width - 1) * sw + dw * (kw - 1) + 1 + opw - 2 * pw
    co, taps = og * groups, og * kh * kw
    # a[g, (o, i, j), c] = w[g c_per + c, o, i, j]: four (o, i, j) rows per pass, one tap per c
    a = _blocks(np.ascontiguousarray(w).reshape(groups, ci // groups, taps).transpose(0, 2, 1))
    src = read_only(_grid(x, 0, 0, 0, h, width, n * h * width)[0])  # (C, N H W), image after image
    rows, offsets = _taps(ci // groups, 1, 1, 0, 0)  # one tap per channel, no shift
    phases = np.empty((n, co * kh * kw, h, width), x.dtype)
    zeros = np.zeros(phases.shape[1], x.dtype)
    _correlate(src, read_only(a), read_only(zeros), rows, offsets, phases, h, width, 0, 0)
    bias = np.zeros(co, x.dtype) if b is None else np.array(b, x.dtype)
    covered = _covered(h, kh, sh, ph, oph, dh, ho) and _covered(width, kw, sw, pw, opw, dw, wo)
    y = np.empty((n, co, ho, wo), x.dtype)
    _place(read_only(phases), read_only(bias), kh, kw, sh, sw, dh, dw, ph, pw, covered, y)
    return y


@kernel("conv_transpose2d.backward", backend="numba", dtypes=FLOATS, when=stamps_apart_backward)
def conv_transpose2d_backward(gy, x, w, stride, padding, output_padding, dilation, groups):
    """-> gx, gw, gb."""
    if not _apart(w, stride, dilation):
        return reference_backward(gy, x, w, stride, padding, output_padding, dilation, groups)
    n, ci, h, width = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    co, taps, cg = og * groups, og * kh * kw, ci // groups
    phases = np.empty((co * kh * kw, n, h, width), x.dtype)
    sums = np.empty((n, co), x.dtype)
    gy = read_only(np.ascontiguousarray(gy, x.dtype))
    _gather(gy, kh, kw, sh, sw, dh, dw, ph, pw, phases, sums)
    flat = read_only(phases.reshape(co * kh * kw, n * h * width))

    # gx[c] = sum over (o, i, j) of w[c, (o, i, j)] phases[(o, i, j)]: taps are phases, no shift
    a = _blocks(np.ascontiguousarray(w).reshape(groups, cg, taps))
    rows, offsets = _taps(taps, 1, 1, 0, 0)
    gx = np.empty(x.shape, x.dtype)
    zeros = np.zeros(ci, x.dtype)
    _correlate(flat, read_only(a), read_only(zeros), rows, offsets, gx, h, width, 0, 0)

    # gw[c, (o, i, j)] = sum_n sum_pixels x[n, c] phases[(o, i, j), n]
    src = read_only(_grid(x, 0, 0, 0, h, width, n * h * width)[0])
    parts = max(1, min(numba.get_num_threads(), -(-n * h * width // RUN)))
    partial = _weight_grad(src, 0, flat, rows, offsets, n * h * width, groups, parts)
    return gx, partial.sum(axis=0).reshape(w.shape), sums.sum(axis=0)
