"""Numba kernels for max_unpool2d: scatter each value to its recorded position, and gather the
gradient back, one (image, channel) plane per thread, without the reference's index arrays."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FLOATS
from tinyformer.registry import kernel


@njit(parallel=True, cache=True)
def _scatter(x, indices, y):
    n, c = x.shape[0], x.shape[1]
    for plane in prange(n * c):
        src, where = x[plane // c, plane % c], indices[plane // c, plane % c]
        flat = y[plane // c, plane % c].reshape(-1)
        flat[:] = 0  # each thread clears its own plane (np.zeros would be one thread)
        for r in range(src.shape[0]):
            for s in range(src.shape[1]):
                flat[where[r, s]] = src[r, s]


@njit(parallel=True, cache=True)
def _gather(gy, indices, gx):
    n, c = gx.shape[0], gx.shape[1]
    for plane in prange(n * c):
        flat, where = gy[plane // c, plane % c].reshape(-1), indices[plane // c, plane % c]
        dst = gx[plane // c, plane % c]
        for r in range(dst.shape[0]):
            for s in range(dst.shape[1]):
                dst[r, s] = flat[where[r, s]]


@kernel("max_unpool2d.forward", backend="numba", dtypes=FLOATS)
def max_unpool2d_forward(x, indices, out_hw):
    y = np.empty((*x.shape[:2], *out_hw), x.dtype)
    _scatter(np.ascontiguousarray(x), np.ascontiguousarray(indices), y)
    return y


@kernel("max_unpool2d.backward", backend="numba", dtypes=FLOATS)
def max_unpool2d_backward(gy, indices):
    gx = np.empty(indices.shape, gy.dtype)
    _gather(np.ascontiguousarray(gy), np.ascontiguousarray(indices), gx)
    return gx
