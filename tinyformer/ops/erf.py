"""erf: the Gauss error function, y = 2/sqrt(pi) * integral_0^x exp(-t^2) dt.

Forward   y = erf(x)
Backward  gx = gy * 2/sqrt(pi) * exp(-x^2)
Saved     x.

NumPy has no erf (and tinyformer does not depend on SciPy), so it is computed here, on the
input's array module, in two pieces:

- |x| < 1/2: the Maclaurin series erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)).
  With x^2 <= 1/4 the terms fall faster than 4^-n / n!, so 12 of them reach float64 precision,
  and relative precision holds near 0, where 1 - erfc(x) would cancel.
- elsewhere: erf(x) = 1 - erfc(x), with `erfc` below: the Numerical Recipes form
  erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), with P a degree-22 Chebyshev series whose
  coefficients we fitted to high-precision values of log(erfc(z)/t) + z^2 on z in [0, 27].
  Its absolute error is below 2e-15 everywhere, and its relative error below 3e-15 (4e-7 in
  float32) down to the smallest normal numbers, because exp(-z^2) is taken as two factors
  with exact arguments (checked against `math.erfc` in the tests).

`erfc` also gives the exact GELU its normal CDF (`tinyformer/ops/gelu.py`).
"""

from __future__ import annotations

import math

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["erf"]

_ERFC_CHEBYSHEV = (
    -0.6513268598850182, 0.6419697923449327, 0.019476473215405677, -0.009561514797484714,
    -0.0009465953345258005, 0.00036683948875679143, 4.252333294447089e-05,
    -2.0278585238111626e-05, -1.6242839015899299e-06, 1.3036507286718825e-06,
    1.563061310121673e-08, -8.524141769855354e-08, 6.531629996731376e-09, 5.057403500251825e-09,
    -9.899475710667034e-10, -2.2836450300987945e-10, 9.71468708192677e-11,
    1.9518869782703877e-12, -6.6114547161942164e-12, 7.337514281960782e-13,
    4.0064968782787e-13, -1.561708387665779e-13, 1.9347475452185122e-14,
)  # fmt: skip

# float32 needs only the first 12 coefficients: the dropped ones sum to 1.3e-8, so the truncated
# series is within 1.3e-8 (relative) of the full one, below float32's resolution of 6e-8.
_FLOAT32_TERMS = 12

# 2^s + 1, s = half of float64's and float32's mantissa bits, rounded up: a * this -
# (a * this - a) keeps the high half of a's mantissa, whose square is exact.
_SPLIT64, _SPLIT32 = 2.0**27 + 1, 2.0**12 + 1

# (-1)^n / (n! (2n+1)), n = 0..11: the Maclaurin coefficients of erf(x) * sqrt(pi) / (2x).
_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(12))
_SERIES_BELOW = 0.5
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def erfc(z: np.ndarray) -> np.ndarray:
    """Complementary error function, elementwise: relative error ~3e-15 in float64 and ~4e-7
    in float32 down to the smallest normal numbers (checked against `math.erfc` in the
    tests)."""
    xp = backend.get_array_module(z)
    coefficients = _ERFC_CHEBYSHEV[:_FLOAT32_TERMS] if z.dtype == np.float32 else _ERFC_CHEBYSHEV
    a = xp.abs(z)
    t = 1.0 / (1.0 + 0.5 * a)
    two_s = 4.0 * t - 2.0  # 2s, where s = 2t - 1 maps t in (0, 1] onto [-1, 1]
    # Clenshaw's recurrence b_k = 2s b_{k+1} - b_{k+2} + c_k, in place to spare allocations.
    b1, b2 = xp.zeros_like(a), xp.zeros_like(a)
    for c in coefficients[:0:-1]:
        b2 *= -1.0
        b2 += two_s * b1
        b2 += c
        b1, b2 = b2, b1
    series = 0.5 * two_s * b1 - b2 + coefficients[0]
    # exp(series - a^2) as two factors: a^2 rounded to the dtype is off by up to half an ulp of
    # a^2 (4e-6 at a = 9 in float32), which exp turns into a relative error of that size. With
    # a = hi + lo, hi keeping half the mantissa bits (Veltkamp's split), hi^2 is exact and
    # a^2 - hi^2 = (a - hi)(a + hi) is small. a is capped first, so that the split cannot
    # overflow; erfc(30) is 0 in float64 too.
    a = xp.minimum(a, 30.0)
    scaled = a * (_SPLIT64 if a.dtype == np.float64 else _SPLIT32)
    hi = scaled - (scaled - a)
    y = t * xp.exp(series - (a - hi) * (a + hi)) * xp.exp(-(hi * hi))
    return xp.where(z >= 0, y, 2.0 - y)


def erf_array(x: np.ndarray) -> np.ndarray:
    """Error function, elementwise, on any array module: float64 accuracy (relative near 0)."""
    xp = backend.get_array_module(x)
    near_0 = xp.abs(x) < _SERIES_BELOW
    xs = xp.where(near_0, x, 0.0)  # the series only where it is used: x^2 of 1e30 overflows
    x2 = xs * xs
    inner = xp.zeros_like(x)
    for c in _SERIES[::-1]:  # Horner's rule in x^2
        inner *= x2
        inner += c
    small = _TWO_OVER_SQRT_PI * xs * inner
    y = xp.where(near_0, small, 1.0 - erfc(x))
    return y.astype(x.dtype, copy=False)


class Erf(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return erf_array(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        xp = backend.get_array_module(x)
        a = xp.minimum(xp.abs(x), 30.0)  # exp(-900) is 0 already; x^2 of 1e30 would overflow
        return gy * (_TWO_OVER_SQRT_PI * xp.exp(-(a * a)))


def erf(x: Tensor) -> Tensor:
    """Elementwise error function (`torch.erf`, `torch.special.erf`)."""
    return Erf.apply(x)


SPECS = [OpSpec("erf", erf, unary_sample(-3.5, 3.5), functions=(Erf,))]
