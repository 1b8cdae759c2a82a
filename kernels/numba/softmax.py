"""Numba kernels for softmax over the last axis: per row, one pass for the max, one for the
exponentials and their sum, one to normalise, all on a row that stays in L1 cache; rows run in
parallel. Rows are 1-D views (`x[i]`): 2-D indexing in the inner loops blocks vectorisation."""

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
            e = exp_nonpositive(xi[j] - top)
            yi[j] = e
            total += e
        inv = x.dtype.type(1) / total
        for j in range(yi.size):
            yi[j] *= inv


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, y, gx):
    for i in prange(y.shape[0]):
        gyi, yi, gxi = gy[i], y[i], gx[i]
        dot = y.dtype.type(0)
        for j in range(yi.size):
            dot += gyi[j] * yi[j]
        for j in range(yi.size):
            gxi[j] = yi[j] * (gyi[j] - dot)


@kernel("softmax.forward", backend="numba", dtypes=FLOATS)
def softmax_forward(x: np.ndarray) -> np.ndarray:
    return rowwise(_forward, x)


@kernel("softmax.backward", backend="numba", dtypes=FLOATS)
def softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    return rowwise(_backward, gy, y)
