"""Numba kernels for conv_transpose2d when the stamps do not overlap: the upsampling of U-Nets
(kernel = stride, e.g. 2x2 with stride 2), and any stride with dilation (k - 1) < stride.

Then every output pixel receives at most one kernel tap, so the op splits into phases. Tap
(i, j) of output channel o is a 1x1 convolution of the input, a plain sum over input
channels, written to the pixels (r sh + i dh - ph, q sw + j dw - pw):
    P[n, (o, i, j), r, q] = sum_c w[c, o, i, j] x[n, c, r, q]
    y[n, o, r sh + i dh - ph, q sw + j dw - pw] = b[o] + P[n, (o, i, j), r, q]
Each tap's product is conv2d's kernel (`_correlate`, four output channels by four input
channels per pass, one tap per channel and no shift), whose destination is a strided view of y:
the pixels of that tap, so the phases go straight to their places (no phase array, no second
pass). Pixels no tap reaches (output_padding's, say) get the bias alone.

Backward gathers gy back into phases, G[(o, i, j), n, r, q] = gy at the pixel P went to (0 if
cropped; one flat row per phase, image after image, as conv2d's grid), and then both gradients
are again conv2d's loops: gx[c] = sum_(o,i,j) w[c, (o,i,j)] G[(o,i,j)] (`_correlate`),
gw[c, (o,i,j)] = sum_n sum_pixels x[n, c] G[(o,i,j), n] (`_weight_grad`). Overlapping stamps
(stride 1 with a 3x3 kernel, say) run the reference.

Kernel = stride, no padding (the U-Net's upsampling), with BLAS on one thread (as `tinyformer
train` runs): each image is then one matrix product. x[n] is already a (Ci, H W) matrix, so
    P = W^T x[n]                 (Co kh kw, Ci) @ (Ci, H W), BLAS, into a per-worker buffer
    y[n, o, r kh + i, q kw + j] = b[o] + P[(o, i, j), r W + q]      (the stamps, interleaved)
and backward gathers G = gy[n] into the phase layout of P, then two products per image:
    gx[n] = W G                  (Ci, Co kh kw) @ (Co kh kw, H W), straight into gx[n]
    gW   += x[n] G^T             one partial sum per share of images, added at the end
Numba's workers claim images one at a time in the forward (each calls BLAS itself, hence one
BLAS thread); the backward gives worker p images p, p + P, ... (P the pool's size), so that gW
sums in the same order on any number of threads. A worker's P or G stays in its core's cache
between the product and the copy. BLAS does these products at ~110 GFLOP/s a core; the phase
loops above reach about half that. Batches smaller than the pool, groups, and BLAS with its own
threads take the phase loops.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._blas import blas_one_thread
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, U, pool_size, read_only
from tinyformer.kernels.numba._tasks import claim, new_counter
from tinyformer.kernels.numba.conv2d import (
    RUN,
    _blocks,
    _correlate,
    _grid,
    _output,
    _taps,
    _weight_grad,
)
from tinyformer.registry import kernel


def _apart(w, stride, dilation) -> bool:
    return all(d * (k - 1) < s for k, s, d in zip(w.shape[2:], stride, dilation))


def stamps_apart(x, w, b, stride, padding, output_padding, dilation, groups) -> bool:
    """the kernel's stamps do not overlap: dilation (k - 1) < stride on both axes (kernel =
    stride, no padding, BLAS on one thread: one BLAS product per image)"""
    return _apart(w, stride, dilation)


def stamps_apart_backward(gy, x, w, stride, padding, output_padding, dilation, groups) -> bool:
    """the kernel's stamps do not overlap: dilation (k - 1) < stride on both axes (kernel =
    stride, no padding, BLAS on one thread: two BLAS products per image)"""
    return _apart(w, stride, dilation)


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


def _phase(size, k, s, p, d, out):
    """For tap k of one axis: (first input row, its output row, count) of the input rows whose
    output row r s + k d - p lies inside the output's `out` rows."""
    first = max(0, -(-(p - k * d) // s))
    last = min(size - 1, (out - 1 + p - k * d) // s)
    return first, first * s + k * d - p, last - first + 1


def _stamps_tile(x, w, stride, padding, output_padding, dilation, groups) -> bool:
    """kernel = stride with nothing cropped or added, one group, a batch for every worker, and
    BLAS on one thread: the per-image products below apply"""
    return (
        tuple(w.shape[2:]) == tuple(stride)
        and tuple(padding) == (0, 0)
        and tuple(output_padding) == (0, 0)
        and tuple(dilation) == (1, 1)
        and groups == 1
        and x.shape[0] >= pool_size()  # the pool's, as the path must not change with the load
        and blas_one_thread()
    )


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _stamp(x, wt, b, kh, kw, workers, y):
    """y[n, o, r kh + i, q kw + j] = b[o] + (wt x[n])[(o, i, j), r W + q], the workers claiming
    images one at a time."""
    n, ci, h, w = x.shape
    co = y.shape[1]
    out = y.reshape(-1)  # flat, unsigned indices: no row views (their reference counts)
    wo, hw = U(w * kw), U(h * w)
    plane = U(h * kh) * wo
    tasks = new_counter()  # images are claimed one at a time (_tasks.py)
    for _ in prange(workers):
        stamps = np.empty((wt.shape[0], h * w), x.dtype)  # P for one image: (Co kh kw, H W)
        src = stamps.reshape(-1)
        img = claim(tasks)
        while img < n:
            np.dot(wt, x[img].reshape(ci, h * w), stamps)
            for o in range(co):
                bias, start = b[o], U(img * co + o) * plane
                for i in range(kh):
                    tap = U((o * kh + i) * kw)  # the row of P for (o, i, 0)
                    for r in range(U(h)):
                        line = start + (r * U(kh) + U(i)) * wo  # W kw pixels, taps interleaved
                        at = tap * hw + r * U(w)
                        if kw == 2:  # the two taps' rows named: the interleaved stores vectorise
                            for q in range(U(w)):
                                out[line + U(2) * q] = src[at + q] + bias
                                out[line + U(2) * q + U(1)] = src[at + hw + q] + bias
                        else:
                            for j in range(U(kw)):
                                for q in range(U(w)):
                                    out[line + q * U(kw) + j] = src[at + j * hw + q] + bias
            img = claim(tasks)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _unstamp(gy, x, w2, kh, kw, workers, gx, gw_parts, sums):
    """gx[n] = w2 G, gw_parts[p] = sum of x[n] G^T over images p, p + workers, ..., sums[n, o] =
    the sum of gy[n, o]; G[(o, i, j), r W + q] = gy[n, o, r kh + i, q kw + j]. Fixed shares, not
    claimed: each image lands in the same partial sum every run, on any number of threads."""
    n, ci, h, w = x.shape
    co, taps = gy.shape[1], w2.shape[1]
    src = gy.reshape(-1)  # flat, unsigned indices: no row views (their reference counts)
    wo, hw = U(w * kw), U(h * w)
    plane = U(h * kh) * wo
    for p in prange(workers):
        phases = np.empty((taps, h * w), x.dtype)  # G for one image
        dst = phases.reshape(-1)
        part = np.empty((ci, taps), x.dtype)
        acc = gw_parts[p]
        acc[:] = 0
        for img in range(p, n, workers):
            for o in range(co):
                start = U(img * co + o) * plane
                total = gy.dtype.type(0)
                for e in range(plane):
                    total += src[start + e]
                sums[img, o] = total
                for i in range(kh):
                    tap = U((o * kh + i) * kw)
                    for r in range(U(h)):
                        line = start + (r * U(kh) + U(i)) * wo
                        at = tap * hw + r * U(w)
                        if kw == 2:
                            for q in range(U(w)):
                                dst[at + q] = src[line + U(2) * q]
                                dst[at + hw + q] = src[line + U(2) * q + U(1)]
                        else:
                            for j in range(U(kw)):
                                for q in range(U(w)):
                                    dst[at + j * hw + q] = src[line + q * U(kw) + j]
            np.dot(w2, phases, gx[img].reshape(ci, h * w))
            np.dot(x[img].reshape(ci, h * w), phases.T, part)
            acc += part


def _forward_tiles(x, w, b):
    n, ci, h, width = x.shape
    _, co, kh, kw = w.shape
    wt = read_only(np.ascontiguousarray(w.reshape(ci, co * kh * kw).T, x.dtype))  # (Co kh kw, Ci)
    bias = read_only(np.zeros(co, x.dtype) if b is None else np.array(b, x.dtype))
    y = np.empty((n, co, h * kh, width * kw), x.dtype)
    workers = numba.get_num_threads()
    _stamp(read_only(np.ascontiguousarray(x)), wt, bias, kh, kw, workers, y)
    return y


def _backward_tiles(gy, x, w):
    n, ci, h, width = x.shape
    _, co, kh, kw = w.shape
    w2 = read_only(np.ascontiguousarray(w, x.dtype).reshape(ci, co * kh * kw))
    workers = pool_size()  # shares of the images, and partial sums of gw: the pool's count
    gx = np.empty(x.shape, x.dtype)
    parts = np.empty((workers, ci, co * kh * kw), x.dtype)
    sums = np.empty((n, co), x.dtype)
    gy = read_only(np.ascontiguousarray(gy, x.dtype))
    _unstamp(gy, read_only(np.ascontiguousarray(x)), w2, kh, kw, workers, gx, parts, sums)
    return gx, parts.sum(axis=0).reshape(w.shape), sums.sum(axis=0)


@kernel("conv_transpose2d.forward", backend="numba", dtypes=FLOATS, accepts=stamps_apart)
def conv_transpose2d_forward(x, w, b, stride, padding, output_padding, dilation, groups):
    if _stamps_tile(x, w, stride, padding, output_padding, dilation, groups):
        return _forward_tiles(x, w, b)
    n, ci, h, width = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    ho = (h - 1) * sh + dh * (kh - 1) + 1 + oph - 2 * ph
    wo = (width - 1) * sw + dw * (kw - 1) + 1 + opw - 2 * pw
    co, cg = og * groups, ci // groups
    bias = read_only(np.zeros(co, x.dtype) if b is None else np.array(b, x.dtype))
    covered = _covered(h, kh, sh, ph, oph, dh, ho) and _covered(width, kw, sw, pw, opw, dw, wo)
    y = np.empty((n, co, ho, wo), x.dtype)
    if not covered:
        y[:] = bias[:, None, None]  # the pixels no tap reaches (output_padding's, say)
    src = read_only(_grid(x, 0, 0, 0, h, width, n * h * width)[0])  # (C, N H W)
    rows, offsets = _taps(cg, 1, 1, 0, 0)  # one tap per input channel, no shift
    workers = numba.get_num_threads()
    for i in range(kh):
        r0, y0, count = _phase(h, i, sh, ph, dh, ho)
        for j in range(kw):
            c0, x0, ccount = _phase(width, j, sw, pw, dw, wo)
            if count <= 0 or ccount <= 0:
                continue  # this tap's pixels are all cropped
            # the phase's product goes straight to its pixels: a strided view of y
            dst = y[:, :, y0 : y0 + (count - 1) * sh + 1 : sh, x0 : x0 + (ccount - 1) * sw + 1 : sw]
            a = w[:, :, i, j].reshape(groups, cg, og).transpose(0, 2, 1)  # (g, Co/g, Ci/g)
            a = read_only(_blocks(np.ascontiguousarray(a)))
            _correlate(src, a, bias, rows, offsets, *_output(dst), h, width, r0, c0, workers)
    return y


@kernel("conv_transpose2d.backward", backend="numba", dtypes=FLOATS, accepts=stamps_apart_backward)
def conv_transpose2d_backward(gy, x, w, stride, padding, output_padding, dilation, groups):
    """-> gx, gw, gb."""
    if _stamps_tile(x, w, stride, padding, output_padding, dilation, groups):
        return _backward_tiles(gy, x, w)
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
    workers = numba.get_num_threads()
    args = (flat, read_only(a), read_only(zeros), rows, offsets, *_output(gx), h, width)
    _correlate(*args, 0, 0, workers)

    # gw[c, (o, i, j)] = sum_n sum_pixels x[n, c] phases[(o, i, j), n]
    src = read_only(_grid(x, 0, 0, 0, h, width, n * h * width)[0])
    parts = max(1, min(pool_size(), -(-n * h * width // RUN)))  # not the threads: same bits
    partial = _weight_grad(src, 0, flat, rows, offsets, n * h * width, groups, parts)
    return gx, partial.sum(axis=0).reshape(w.shape), sums.sum(axis=0)
