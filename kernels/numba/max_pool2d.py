"""Numba kernels for max_pool2d: one pass over each window for the maximum and its position
(the reference builds a strided view, an argmax array and a gather), and a backward that adds
each gradient at its recorded position (the reference's bincount over flat positions).

Parallel over (image, channel) planes: each plane's windows and gradient belong to one thread,
so overlapping windows need no atomics.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
from tinyformer.ops._im2col import out_size
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, kh, kw, sh, sw, ph, pw, dh, dw, y, indices):
    n, c, h, w = x.shape
    ho, wo = y.shape[2], y.shape[3]
    for plane in prange(n * c):
        src = x[plane // c, plane % c]
        dst, where = y[plane // c, plane % c], indices[plane // c, plane % c]
        for r in range(ho):
            for s in range(wo):
                best, at = -np.inf, -1
                for i in range(kh):
                    row = r * sh + i * dh - ph
                    if row < 0 or row >= h:
                        continue  # padding: -inf, never chosen
                    for j in range(kw):
                        col = s * sw + j * dw - pw
                        if 0 <= col < w and (at < 0 or src[row, col] > best):
                            best, at = src[row, col], row * w + col  # first max wins ties
                dst[r, s] = best
                where[r, s] = at


@njit(parallel=True, cache=True)
def _backward(gy, indices, gx):
    n, c = gy.shape[0], gy.shape[1]
    for plane in prange(n * c):
        g, where = gy[plane // c, plane % c], indices[plane // c, plane % c]
        flat = gx[plane // c, plane % c].reshape(-1)
        flat[:] = 0  # each thread clears its own plane (np.zeros would be one thread)
        for r in range(g.shape[0]):
            for s in range(g.shape[1]):
                flat[where[r, s]] += g[r, s]


@kernel("max_pool2d.forward", backend="numba", dtypes=FLOATS)
def max_pool2d_forward(x, kernel, stride, padding, dilation):
    n, c, h, w = x.shape
    ho = out_size(h, kernel[0], stride[0], padding[0], dilation[0])
    wo = out_size(w, kernel[1], stride[1], padding[1], dilation[1])
    y, indices = np.empty((n, c, ho, wo), x.dtype), np.empty((n, c, ho, wo), np.int64)
    _forward(np.ascontiguousarray(x), *kernel, *stride, *padding, *dilation, y, indices)
    return y, indices


@kernel("max_pool2d.backward", backend="numba", dtypes=FLOATS)
def max_pool2d_backward(gy, indices, x_shape):
    gx = np.empty(x_shape, gy.dtype)
    _backward(np.ascontiguousarray(gy), np.ascontiguousarray(indices), gx)
    return gx
