"""A5: softmax over the last axis as fused Numba kernels (the student's; see
assignments/A5_kernels.py).

Forward, per row: one pass for the max m, one for e_j = exp(x_j - m) and their sum s, one to
scale by 1/s, on a row that stays in L1 cache; rows run in parallel (`prange`). Backward, per
row: softmax's backward (A2.1's formula), one pass for its dot product and one for gx.

Importing this module registers both kernels as the "numba" backend of "softmax.forward" and
"softmax.backward", **in place of** tinyformer's own (`kernels/numba/softmax.py`), for the rest
of the process: import it in the notebook or the grader, never from the library or its tests.
It imports nothing from `tinyformer.kernels`: the student's kernels stand beside the library's,
not on them.

Compiles: the wrappers hand the kernels C-contiguous, read-only 2-D inputs, so each kernel
compiles once per dtype (float32, float64); `cache=True` keeps the machine code in
`__pycache__` beside this file, so a warm process loads it instead of compiling (~1 s each).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer import registry

__all__ = ["softmax_backward", "softmax_forward"]

# tinyformer's own kernel files register on the registry's first dispatch, and would then replace
# these: load them now, so that this module's registrations come last and stay. (It also sets
# libgomp's spin count before the first parallel kernel runs: see tinyformer/registry.py.)
registry.primitives()

# LLVM's fast-math flags minus "nnan" and "ninf": a masked score is -inf, and exp(-inf) must be
# exactly 0. Reassociation lets LLVM vectorise the sums.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward_rows(x, y):
    """y[i] = softmax(x[i]) for every row i of x (rows, D); y is written, x only read."""
    ### BEGIN SOLUTION A5.1
    for i in prange(x.shape[0]):
        xi, yi = x[i], y[i]  # 1-D views: 2-D indexing in the inner loops blocks vectorisation
        top = xi[0]
        for j in range(1, xi.size):
            top = max(top, xi[j])
        total = x.dtype.type(0)  # not 0.0: a float64 accumulator would slow float32 rows
        for j in range(xi.size):
            e = np.exp(xi[j] - top)
            yi[j] = e
            total += e
        inv = x.dtype.type(1) / total
        for j in range(yi.size):
            yi[j] *= inv
    ### END SOLUTION


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward_rows(gy, y, gx):
    """gx[i] = y[i] * (gy[i] - sum(gy[i] * y[i])) for every row i; gx is written."""
    ### BEGIN SOLUTION A5.2
    for i in prange(y.shape[0]):
        gyi, yi, gxi = gy[i], y[i], gx[i]
        dot = y.dtype.type(0)
        for j in range(yi.size):
            dot += gyi[j] * yi[j]
        for j in range(yi.size):
            gxi[j] = yi[j] * (gyi[j] - dot)
    ### END SOLUTION


def _rows(a: np.ndarray) -> np.ndarray:
    """`a` as C-contiguous, read-only (rows, last axis). Why read-only: Numba compiles a kernel
    once per combination of writeable and read-only arguments, and NumPy hands out both (a
    broadcast view is read-only); all read-only, each kernel compiles once per dtype."""
    rows = np.ascontiguousarray(a).reshape(-1, a.shape[-1]).view()
    rows.flags.writeable = False
    return rows


@registry.kernel("softmax.forward", backend="numba", dtypes=("float32", "float64"))
def softmax_forward(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of x (..., D), D >= 1; returns y of x's shape and dtype."""
    x_rows = _rows(x)
    y = np.empty(x_rows.shape, x.dtype)
    if y.size:
        _forward_rows(x_rows, y)
    return y.reshape(x.shape)


@registry.kernel("softmax.backward", backend="numba", dtypes=("float32", "float64"))
def softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """gx (..., D) from gy and the forward's output y, both (..., D) of y's dtype."""
    gy_rows, y_rows = _rows(gy.astype(y.dtype, copy=False)), _rows(y)
    gx = np.empty(y_rows.shape, y.dtype)
    if gx.size:
        _backward_rows(gy_rows, y_rows, gx)
    return gx.reshape(y.shape)
