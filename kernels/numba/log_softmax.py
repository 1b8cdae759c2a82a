"""Numba kernels for log_softmax over the last axis: y = (x - max) - log(sum exp(x - max))."""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, as_rows

from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, y):
    n, m = x.shape
    for i in prange(n):
        top = x[i, 0]
        for j in range(1, m):
            top = max(top, x[i, j])
        total = x.dtype.type(0)
        for j in range(m):
            total += exp_nonpositive(x[i, j] - top)
        shift = top + np.log(total)
        for j in range(m):
            y[i, j] = x[i, j] - shift


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, y, gx):
    n, m = y.shape
    for i in prange(n):
        total = gy.dtype.type(0)
        for j in range(m):
            total += gy[i, j]
        for j in range(m):
            gx[i, j] = gy[i, j] - exp_nonpositive(y[i, j]) * total


@kernel("log_softmax.forward", backend="numba", dtypes=FLOATS)
def log_softmax_forward(x: np.ndarray) -> np.ndarray:
    x2 = as_rows(x)
    y = np.empty_like(x2)
    if x2.shape[1]:  # the kernel reads x[i, 0]
        _forward(x2, y)
    return y.reshape(x.shape)


@kernel("log_softmax.backward", backend="numba", dtypes=FLOATS)
def log_softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    y2 = as_rows(y)
    gx = np.empty_like(y2)
    _backward(as_rows(gy), y2, gx)
    return gx.reshape(y.shape)
