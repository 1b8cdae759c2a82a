"""Numba kernels for fused softmax cross-entropy over rows of (R, C): log-sum-exp and the
picked logit in one pass per row; the backward writes p - (1 - eps) onehot - eps / C directly,
never forming a one-hot matrix."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(logits, target, ignore_index, smoothing, loss, lse):
    n, c = logits.shape
    zero, one = logits.dtype.type(0), logits.dtype.type(1)
    for i in prange(n):
        row = logits[i]  # a 1-D view: 2-D indexing in the inner loops blocks vectorisation
        top = row_max(row, c)
        total = zero
        for j in range(c):
            total += exp_nonpositive(row[j] - top)
        row_lse = top + np.log(total)
        lse[i] = row_lse
        t = target[i]
        if t == ignore_index:
            loss[i] = zero
        else:
            nll = row_lse - row[t]
            smooth = row_lse - row.sum() / c
            loss[i] = (one - smoothing) * nll + smoothing * smooth


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gloss, logits, target, lse, ignore_index, smoothing, glogits):
    n, c = logits.shape
    one = logits.dtype.type(1)
    uniform = smoothing / logits.dtype.type(c)  # not `/ c`: an int promotes float32 to float64
    for i in prange(n):
        row = logits[i]
        grow = glogits[i]
        t = target[i]
        # Multiply by 0 for ignored rows rather than `continue`: Numba's parfor pass hoisted the
        # row views out of the loop when they were made after a `continue` (every row got row 0).
        g = gloss[i] * row.dtype.type(t != ignore_index)
        row_lse = lse[i]
        for j in range(c):
            grow[j] = g * (exp_nonpositive(row[j] - row_lse) - uniform)
        if t != ignore_index:
            grow[t] -= g * (one - smoothing)


@kernel("cross_entropy.forward", backend="numba", dtypes=FLOATS)
def cross_entropy_forward(logits, target, ignore_index, label_smoothing):
    logits = np.ascontiguousarray(logits)
    n = logits.shape[0]
    loss, lse = np.empty(n, logits.dtype), np.empty(n, logits.dtype)
    eps = logits.dtype.type(label_smoothing)
    _forward(logits, np.ascontiguousarray(target), ignore_index, eps, loss, lse)
    return loss, lse


@kernel("cross_entropy.backward", backend="numba", dtypes=FLOATS)
def cross_entropy_backward(gloss, logits, target, lse, ignore_index, label_smoothing):
    logits = np.ascontiguousarray(logits)
    glogits = np.empty_like(logits)
    eps = logits.dtype.type(label_smoothing)
    gloss = np.ascontiguousarray(gloss)
    _backward(gloss, logits, np.ascontiguousarray(target), lse, ignore_index, eps, glogits)
    return glogits
