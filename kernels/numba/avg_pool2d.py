"""Numba kernels for avg_pool2d: each window summed in one pass (the reference sums a strided
view), and a backward that spreads each window's gradient over its pixels, one (image,
channel) plane per thread (the reference loops over kernel taps on whole arrays): first along
an image row, then down the kernel's rows. When window rows do not overlap (stride >= kernel,
the usual 2x2 / 2), each image row is written once instead of cleared and then added to: a
third of the memory traffic."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
from tinyformer.ops._im2col import out_size
from tinyformer.registry import kernel


@njit(cache=True)
def _count(r, s, h, w, kh, kw, sh, sw, ph, pw, include_pad):
    """The divisor of window (r, s): kh kw, or its pixels inside the image."""
    if include_pad:
        return kh * kw
    rows = min(r * sh - ph + kh, h) - max(r * sh - ph, 0)
    cols = min(s * sw - pw + kw, w) - max(s * sw - pw, 0)
    return rows * cols


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, kh, kw, sh, sw, ph, pw, include_pad, y):
    n, c, h, w = x.shape
    for plane in prange(n * c):
        src, dst = x[plane // c, plane % c], y[plane // c, plane % c]
        for r in range(dst.shape[0]):
            for s in range(dst.shape[1]):
                total = x.dtype.type(0)
                for row in range(max(r * sh - ph, 0), min(r * sh - ph + kh, h)):
                    for col in range(max(s * sw - pw, 0), min(s * sw - pw + kw, w)):
                        total += src[row, col]
                dst[r, s] = total / _count(r, s, h, w, kh, kw, sh, sw, ph, pw, include_pad)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, kh, kw, sh, sw, ph, pw, include_pad, gx):
    n, c, h, w = gx.shape
    ho, wo = gy.shape[2], gy.shape[3]
    apart = sh >= kh  # no image row is under two window rows: write rows, never add to them
    for plane in prange(n * c):
        g, dst = gy[plane // c, plane % c], gx[plane // c, plane % c]
        if not apart:
            dst[:, :] = 0  # each thread clears its own plane (np.zeros would be one thread)
        share = np.empty(wo, gx.dtype)  # each window's gradient over its divisor, one row
        wide = np.empty(w, gx.dtype)  # one window row's gradient spread over an image row
        for r in range(ho):
            for s in range(wo):
                share[s] = g[r, s] / _count(r, s, h, w, kh, kw, sh, sw, ph, pw, include_pad)
            # Spread along the row first, one kernel tap at a time (strided, but only ho times)
            wide[:] = 0
            for j in range(kw):
                first = max(0, -((j - pw) // sw))  # windows whose tap j lands inside the row
                last = min(wo, (w - 1 + pw - j) // sw + 1)
                for s in range(first, last):
                    wide[s * sw - pw + j] += share[s]
            # then copy (or add) that row to each of the kh image rows the window covers:
            # contiguous loops that vectorise, where spreading each tap into the plane did not.
            for i in range(kh):
                row = r * sh - ph + i
                if 0 <= row < h:
                    line = dst[row]
                    if apart:
                        line[:] = wide
                    else:
                        for col in range(w):
                            line[col] += wide[col]
        if apart:  # the rows no window covers: between windows, or past the last one
            for row in range(h):
                if (row + ph) % sh >= kh or (row + ph) // sh >= ho:
                    dst[row, :] = 0


@kernel("avg_pool2d.forward", backend="numba", dtypes=FLOATS)
def avg_pool2d_forward(x, kernel, stride, padding, include_pad):
    n, c, h, w = x.shape
    ho = out_size(h, kernel[0], stride[0], padding[0], 1)
    wo = out_size(w, kernel[1], stride[1], padding[1], 1)
    y = np.empty((n, c, ho, wo), x.dtype)
    _forward(np.ascontiguousarray(x), *kernel, *stride, *padding, include_pad, y)
    return y


@kernel("avg_pool2d.backward", backend="numba", dtypes=FLOATS)
def avg_pool2d_backward(gy, x_shape, kernel, stride, padding, include_pad):
    gx = np.empty(x_shape, gy.dtype)
    _backward(np.ascontiguousarray(gy), *kernel, *stride, *padding, include_pad, gx)
    return gx
