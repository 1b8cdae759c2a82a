"""Numba kernels for dropout: the keep mask comes from the same counter-based splitmix64 hash as
the reference, element by element, so both backends draw identical masks for a seed."""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, flat
from tinyformer.ops.shared import GOLDEN, splitmix64_unit  # the reference's hash
from tinyformer.registry import kernel

register_jitable(splitmix64_unit)  # the reference's hash, compiled where a kernel calls it


@register_jitable
def _uniform(i, base):
    """The reference's uniform for element i (0-based) of a seed's `base` (seed * golden ratio).
    Every operand stays uint64 (a plain int would turn the arithmetic into float64)."""
    return splitmix64_unit(np.uint64(i + 1) * GOLDEN + base)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, p, base, scale, y, keep):
    for i in prange(x.size):
        kept = _uniform(i, base) >= p
        keep[i] = kept
        y[i] = x[i] * scale if kept else x.dtype.type(0)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, keep, scale, gx):
    for i in prange(gy.size):
        gx[i] = gy[i] * scale if keep[i] else gy.dtype.type(0)


@kernel("dropout.forward", backend="numba", dtypes=FLOATS)
def dropout_forward(x: np.ndarray, p: float, seed: int):
    x1 = flat(x)
    y, keep = np.empty_like(x1), np.empty(x1.size, np.bool_)
    # The hash's uint64 products wrap on purpose. Compiled, nothing warns; run as plain Python
    # (NUMBA_DISABLE_JIT=1, for debugging) NumPy would warn at every element.
    with np.errstate(over="ignore"):
        base = np.uint64(seed) * GOLDEN
        _forward(x1, float(p), base, x.dtype.type(1.0 / (1.0 - p)), y, keep)
    return y.reshape(x.shape), keep.reshape(x.shape)


@kernel("dropout.backward", backend="numba", dtypes=FLOATS)
def dropout_backward(gy: np.ndarray, keep: np.ndarray, p: float) -> np.ndarray:
    g1 = flat(gy)
    gx = np.empty_like(g1)
    _backward(g1, flat(keep), gy.dtype.type(1.0 / (1.0 - p)), gx)
    return gx.reshape(gy.shape)
