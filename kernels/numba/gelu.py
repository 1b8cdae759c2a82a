"""Numba kernels for GELU, both forms, in one pass over memory.

libm's erfc and tanh are scalar calls that stop LLVM from vectorising the loop (the tanh form ran
5x slower than NumPy's SIMD tanh), so both are built from the vectorisable `exp_nonpositive`:
- tanh(u) = sign(u) (1 - e) / (1 + e), e = exp(-2|u|) <= 1. Its absolute error is a few ulp,
  which is what GELU's 1 + tanh(u) needs (not tanh's relative accuracy near 0).
- float32 erfc(a) = t exp(-a^2) Q(s) for a >= 0, with t = 1 / (1 + a/2) and s = 2t - 1 in
  (-1, 1]: Q(s) = erfcx(a) / t is smooth and bounded (from 1 at a = 0 to 1/(2 sqrt(pi)) as a
  grows), and a degree-10 polynomial fits it to 6e-8 relative. The backward needs the
  Gaussian density exp(-x^2/2) as well, and that is the same exp(-a^2) (a = |x|/sqrt(2)): one
  exp per element in both passes. float64 keeps libm's erfc: exactness matters more than speed
  there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload, register_jitable

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, flat
from tinyformer.registry import kernel

# Q(s) = erfcx(a) / t as a polynomial in s: a least-squares Chebyshev fit of degree 10,
# converted to monomial coefficients (all below 0.52, so Horner's rule in float32 loses nothing
# to cancellation). Made once, offline, with SciPy:
#     s = np.cos(np.linspace(0, np.pi, 4001))[:-1];  t = (s + 1) / 2
#     chebyshev.cheb2poly(chebyshev.chebfit(s, scipy.special.erfcx(2 / t - 2) / t, 10))
# Over 0 <= a <= 9 the float32 erfc built from it is within 4e-6 relative of libm's (the error
# is exp(-a^2)'s rounding at large a; Q itself is within 6e-8); tests/test_kernels.py checks it
# against math.erfc.
_ERFCX_OVER_T = np.array(
    [
        0.5107913569161225, 0.3435803187009448, 0.1397357335112846, 0.018221669588717956,
        -0.010751626087236895, -0.0032434525914912028, 0.0015291568428467716,
        0.00043067151455741305, -0.0002993823033156639, -3.6602390004610813e-05,
        4.216101552529885e-05,
    ],
    np.float32,
)  # fmt: skip
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def erfc_and_gauss(z):
    """(erfc(z), exp(-z^2)) for Numba kernels (a stand-in; the overload below is what
    compiles)."""
    return math.erfc(z), math.exp(-z * z)


def _erfc_and_gauss32(z):
    """Q by Horner's rule, written out: loop-free, so it inlines into vectorised loops."""
    c = _ERFCX_OVER_T
    f = np.float32
    a = abs(z)
    t = f(1) / (f(1) + f(0.5) * a)
    s = f(2) * t - f(1)  # maps t in (0, 1] onto [-1, 1]
    q = c[10] * s + c[9]
    q = q * s + c[8]
    q = q * s + c[7]
    q = q * s + c[6]
    q = q * s + c[5]
    q = q * s + c[4]
    q = q * s + c[3]
    q = q * s + c[2]
    q = q * s + c[1]
    q = q * s + c[0]
    gauss = exp_nonpositive(-a * a)
    y = t * q * gauss
    return y + (f(2) - f(2) * y) * f(z < f(0)), gauss  # erfc(-a) = 2 - erfc(a), branch-free


@overload(erfc_and_gauss, inline="always")
def _erfc_and_gauss_overload(z):
    if isinstance(z, types.Float) and z.bitwidth == 32:
        return register_jitable(_erfc_and_gauss32)
    # float64: libm's erfc, accurate to ~1e-16 like the reference
    return lambda z: (math.erfc(z), exp_nonpositive(-z * z))


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
            y[i] = f(0.5) * v * erfc_and_gauss(-v * f(_INV_SQRT2))[0]


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
            tail, gauss = erfc_and_gauss(-v * f(_INV_SQRT2))  # gauss = exp(-v^2 / 2)
            dy = f(0.5) * tail + v * f(_INV_SQRT_2PI) * gauss
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
