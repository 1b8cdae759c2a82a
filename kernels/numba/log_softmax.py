"""Numba kernels for log_softmax over the last axis: y = (x - max) - log(sum exp(x - max)).
Rows are 1-D views (`x[i]`): 2-D indexing in the inner loops blocks vectorisation."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, rowwise
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, y):
    for i in prange(x.shape[0]):
        xi, yi = x[i], y[i]
        top = row_max(xi, xi.size)
        total = x.dtype.type(0)
        for j in range(xi.size):
            total += exp_nonpositive(xi[j] - top)
        shift = top + np.log(total)
        for j in range(xi.size):
            yi[j] = xi[j] - shift


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, y, gx):
    for i in prange(y.shape[0]):
        gyi, yi, gxi = gy[i], y[i], gx[i]
        total = gyi.sum()
        for j in range(yi.size):
            gxi[j] = gyi[j] - exp_nonpositive(yi[j]) * total


@kernel("log_softmax.forward", backend="numba", dtypes=FLOATS)
def log_softmax_forward(x: np.ndarray) -> np.ndarray:
    return rowwise(_forward, x)


@kernel("log_softmax.backward", backend="numba", dtypes=FLOATS)
def log_softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    return rowwise(_backward, gy, y)
