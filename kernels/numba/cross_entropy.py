"""Numba kernels for fused softmax cross-entropy over rows of (R, C): log-sum-exp and the
picked logit in one pass per row; the backward writes p - (1 - eps) onehot - eps / C directly,
never forming a one-hot matrix. Rows are ranges of one flat buffer, indexed unsigned, as in
log_softmax.py."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max_at
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, U, read_only
from tinyformer.registry import kernel


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(logits, target, ignore_index, smoothing, loss, lse):
    n, c = logits.shape
    flat, width = logits.reshape(-1), U(c)
    zero, one = logits.dtype.type(0), logits.dtype.type(1)
    for i in prange(n):
        at = U(i) * width
        top = row_max_at(flat, at, width)
        total, row_sum = zero, zero
        for j in range(at, at + width):
            total += exp_nonpositive(flat[j] - top)
            row_sum += flat[j]
        row_lse = top + np.log(total)
        lse[i] = row_lse
        t = target[i]
        if t == ignore_index:
            loss[i] = zero
        else:
            nll = row_lse - flat[at + U(t)]
            smooth = row_lse - row_sum / logits.dtype.type(c)
            loss[i] = (one - smoothing) * nll + smoothing * smooth


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gloss, logits, target, lse, ignore_index, smoothing, glogits):
    n, c = logits.shape
    one = logits.dtype.type(1)
    uniform = smoothing / logits.dtype.type(c)  # not `/ c`: an int promotes float32 to float64
    flat, gflat, width = logits.reshape(-1), glogits.reshape(-1), U(c)
    for i in prange(n):
        at = U(i) * width
        t = target[i]
        # Multiply by 0 for ignored rows rather than `continue`: Numba's parfor pass once hoisted
        # work out of the loop when it came after a `continue` (every row got row 0).
        g = gloss[i] * logits.dtype.type(t != ignore_index)
        row_lse = lse[i]
        for j in range(at, at + width):
            gflat[j] = g * (exp_nonpositive(flat[j] - row_lse) - uniform)
        if t != ignore_index:
            gflat[at + U(t)] -= g * (one - smoothing)


def _inputs(*arrays: np.ndarray) -> list[np.ndarray]:
    """Contiguous and read-only (a broadcast gradient is read-only, a fresh one not): one
    compile per dtype."""
    return [read_only(np.ascontiguousarray(a)) for a in arrays]


@kernel("cross_entropy.forward", backend="numba", dtypes=FLOATS)
def cross_entropy_forward(logits, target, ignore_index, label_smoothing):
    logits, target = _inputs(logits, target)
    n = logits.shape[0]
    loss, lse = np.empty(n, logits.dtype), np.empty(n, logits.dtype)
    eps = logits.dtype.type(label_smoothing)
    _forward(logits, target, ignore_index, eps, loss, lse)
    return loss, lse


@kernel("cross_entropy.backward", backend="numba", dtypes=FLOATS)
def cross_entropy_backward(gloss, logits, target, lse, ignore_index, label_smoothing):
    gloss, logits, target, lse = _inputs(gloss, logits, target, lse)
    glogits = np.empty_like(logits)
    eps = logits.dtype.type(label_smoothing)
    _backward(gloss, logits, target, lse, ignore_index, eps, glogits)
    return glogits
