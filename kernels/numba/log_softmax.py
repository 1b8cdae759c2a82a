"""Numba kernels for log_softmax over the last axis: y = (x - max) - log(sum exp(x - max)).
Rows are ranges of one flat buffer, indexed unsigned (_rows.py): 2-D indexing in the inner loops
blocks vectorisation, and a 1-D view per row (`x[i]`) costs two reference-count updates, a
third of the backward at (768, 65) on one core (25.8 -> 18.1 us)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max_at
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, U, rowwise
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, y):
    rows, c = x.shape
    xf, yf, n = x.reshape(-1), y.reshape(-1), U(c)
    for i in prange(rows):
        at = U(i) * n
        top = row_max_at(xf, at, n)
        total = x.dtype.type(0)
        for j in range(at, at + n):
            total += exp_nonpositive(xf[j] - top)
        shift = top + np.log(total)
        for j in range(at, at + n):
            yf[j] = xf[j] - shift


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, y, gx):
    rows, c = y.shape
    gyf, yf, gxf, n = gy.reshape(-1), y.reshape(-1), gx.reshape(-1), U(c)
    for i in prange(rows):
        at = U(i) * n
        total = y.dtype.type(0)
        for j in range(at, at + n):
            total += gyf[j]
        for j in range(at, at + n):
            gxf[j] = gyf[j] - exp_nonpositive(yf[j]) * total


@kernel("log_softmax.forward", backend="numba", dtypes=FLOATS)
def log_softmax_forward(x: np.ndarray) -> np.ndarray:
    return rowwise(_forward, x)


@kernel("log_softmax.backward", backend="numba", dtypes=FLOATS)
def log_softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    return rowwise(_backward, gy, y)
