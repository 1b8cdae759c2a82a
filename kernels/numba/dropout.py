"""Numba kernels for dropout: the keep mask comes from the same counter-based splitmix64 hash as
the reference, element by element, so both backends draw identical masks for a seed."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, flat
from tinyformer.registry import kernel

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, p, seed, scale, y, keep):
    # Every operand stays uint64 (a plain int would turn the arithmetic into float64).
    base = np.uint64(seed) * _GOLDEN
    s30, s27, s31, s11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
    for i in prange(x.size):
        z = np.uint64(i + 1) * _GOLDEN + base
        z = (z ^ (z >> s30)) * _MIX1
        z = (z ^ (z >> s27)) * _MIX2
        z = z ^ (z >> s31)
        kept = (z >> s11) * (1.0 / 9007199254740992.0) >= p  # 2**53
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
    _forward(x1, float(p), seed, x.dtype.type(1.0 / (1.0 - p)), y, keep)
    return y.reshape(x.shape), keep.reshape(x.shape)


@kernel("dropout.backward", backend="numba", dtypes=FLOATS)
def dropout_backward(gy: np.ndarray, keep: np.ndarray, p: float) -> np.ndarray:
    g1 = flat(gy)
    gx = np.empty_like(g1)
    _backward(g1, flat(keep), gy.dtype.type(1.0 / (1.0 - p)), gx)
    return gx.reshape(gy.shape)
