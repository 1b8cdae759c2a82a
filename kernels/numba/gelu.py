"""Numba kernels for GELU, both forms, in one pass over memory.

libm's erfc and tanh are scalar calls that stop LLVM from vectorising the loop (the tanh form ran
5x slower than NumPy's SIMD tanh), so both are built from the vectorisable `exp_nonpositive`:
- tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|) <= 1. Its absolute error is a few ulp,
  which is what GELU's 1 + tanh(u) needs (not tanh's relative accuracy near 0).
- float32 erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + |z|/2), with the Chebyshev series P fitted
  for the NumPy reference (tinyformer/ops/gelu.py), by Clenshaw's recurrence; the exponent is
  log(erfc(z)/t) <= 0. float64 keeps libm's erfc: exactness matters more than speed there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload, register_jitable

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, flat
from tinyformer.ops.gelu import _ERFC_CHEBYSHEV, _FLOAT32_TERMS
from tinyformer.registry import kernel

_CHEBYSHEV32 = np.array(_ERFC_CHEBYSHEV[:_FLOAT32_TERMS], np.float32)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def erfc(z):
    """erfc for Numba kernels (a stand-in; the overload below is what compiles)."""
    return math.erfc(z)


def _erfc32(z):
    """The first 12 Chebyshev terms by Clenshaw's recurrence, written out: loop-free, so it
    inlines into vectorised loops (the dropped terms sum to 1.3e-8, below float32 resolution)."""
    c = _CHEBYSHEV32
    f = np.float32
    a = abs(z)
    t = f(1) / (f(1) + f(0.5) * a)
    u = f(4) * t - f(2)  # 2s, s = 2t - 1 in [-1, 1]
    b1 = c[11]
    b2, b1 = b1, u * b1 + c[10]
    b2, b1 = b1, u * b1 - b2 + c[9]
    b2, b1 = b1, u * b1 - b2 + c[8]
    b2, b1 = b1, u * b1 - b2 + c[7]
    b2, b1 = b1, u * b1 - b2 + c[6]
    b2, b1 = b1, u * b1 - b2 + c[5]
    b2, b1 = b1, u * b1 - b2 + c[4]
    b2, b1 = b1, u * b1 - b2 + c[3]
    b2, b1 = b1, u * b1 - b2 + c[2]
    b2, b1 = b1, u * b1 - b2 + c[1]
    series = f(0.5) * u * b1 - b2 + c[0]
    y = t * exp_nonpositive(series - a * a)
    return y + (f(2) - f(2) * y) * f(z < f(0))  # erfc(-a) = 2 - erfc(a), without a branch


@overload(erfc, inline="always")
def _erfc_overload(z):
    if isinstance(z, types.Float) and z.bitwidth == 32:
        return register_jitable(_erfc32)
    return lambda z: math.erfc(z)  # float64: libm's, accurate to ~1e-16 like the reference


@njit(fastmath=FASTMATH, cache=True, inline="always")  # inlined, so the loop vectorises
def _tanh(u):
    f = type(u)
    e = exp_nonpositive(f(-2) * abs(u))
    th = (f(1) - e) / (f(1) + e)
    return th * (f(1) - f(2) * f(u < f(0)))  # sign(u) without a branch


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, y, tanh_form):
    f = x.dtype.type
    for i in prange(x.size):
        v = x[i]
        if tanh_form:
            u = f(_SQRT_2_OVER_PI) * (v + f(0.044715) * v * v * v)
            y[i] = f(0.5) * v * (f(1) + _tanh(u))
        else:
            y[i] = f(0.5) * v * erfc(-v * f(_INV_SQRT2))


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, x, gx, tanh_form):
    f = x.dtype.type
    for i in prange(x.size):
        v = x[i]
        if tanh_form:
            th = _tanh(f(_SQRT_2_OVER_PI) * (v + f(0.044715) * v * v * v))
            du = f(_SQRT_2_OVER_PI) * (f(1) + f(0.134145) * v * v)
            dy = f(0.5) * (f(1) + th) + f(0.5) * v * (f(1) - th * th) * du
        else:
            cdf = f(0.5) * erfc(-v * f(_INV_SQRT2))
            dy = cdf + v * f(_INV_SQRT_2PI) * exp_nonpositive(f(-0.5) * v * v)
        gx[i] = gy[i] * dy


@kernel("gelu.forward", backend="numba", dtypes=FLOATS)
def gelu_forward(x: np.ndarray, approximate: str) -> np.ndarray:
    x1 = flat(x)
    y = np.empty_like(x1)
    _forward(x1, y, approximate == "tanh")
    return y.reshape(x.shape)


@kernel("gelu.backward", backend="numba", dtypes=FLOATS)
def gelu_backward(gy: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    x1 = flat(x)
    gx = np.empty_like(x1)
    _backward(flat(gy), x1, gx, approximate == "tanh")
    return gx.reshape(x.shape)
