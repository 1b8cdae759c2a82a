"""gelu: Gaussian error linear unit, exact (erf) form and tanh approximation.

Forward   exact:  y = x * Phi(x),   Phi(x) = P(N(0,1) <= x) = erfc(-x / sqrt 2) / 2
          tanh:   y = x/2 * (1 + tanh(u)),   u = sqrt(2/pi) * (x + 0.044715 x^3)
Backward  exact:  gx = gy * (Phi(x) + x * phi(x)),   phi(x) = exp(-x^2/2) / sqrt(2 pi)
          tanh:   gx = gy * (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) u'),
                  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
Saved     x: recomputing Phi or tanh(u) in backward is cheaper than storing a second array.

NumPy has no erf, so `erfc` below is written here: the Numerical Recipes form
erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2), with P a degree-22 Chebyshev series whose
coefficients we fitted to high-precision values of log(erfc(z)/t) + z^2 on z in [0, 27]. Its
absolute error is below 2e-15 everywhere (checked against `math.erfc` in the tests): float64
accuracy, so the exact form passes float64 gradchecks with room to spare.
"""

from __future__ import annotations

import math

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample, floats

_ERFC_CHEBYSHEV = (
    -0.6513268598850182, 0.6419697923449327, 0.019476473215405677, -0.009561514797484714,
    -0.0009465953345258005, 0.00036683948875679143, 4.252333294447089e-05,
    -2.0278585238111626e-05, -1.6242839015899299e-06, 1.3036507286718825e-06,
    1.563061310121673e-08, -8.524141769855354e-08, 6.531629996731376e-09, 5.057403500251825e-09,
    -9.899475710667034e-10, -2.2836450300987945e-10, 9.71468708192677e-11,
    1.9518869782703877e-12, -6.6114547161942164e-12, 7.337514281960782e-13,
    4.0064968782787e-13, -1.561708387665779e-13, 1.9347475452185122e-14,
)  # fmt: skip
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = 0.044715


# float32 needs only the first 12 coefficients: the dropped ones sum to 1.3e-8, so the truncated
# series is within 1.3e-8 (relative) of the full one, below float32's resolution of 6e-8.
_FLOAT32_TERMS = 12


def erfc(z: np.ndarray) -> np.ndarray:
    """Complementary error function, elementwise: ~2e-15 absolute error in float64, float32
    rounding in float32."""
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
    series -= a * a
    y = t * xp.exp(series)
    return xp.where(z >= 0, y, 2.0 - y)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x), the standard normal CDF, via erfc (accurate in both tails)."""
    return 0.5 * erfc(-x * (1.0 / math.sqrt(2.0)))


@registry.reference("gelu.forward")
def gelu_forward(x: np.ndarray, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        xp = backend.get_array_module(x)
        u = _SQRT_2_OVER_PI * (x + _TANH_C * x * x * x)  # x**3 hits NumPy's slow pow
        return (0.5 * x * (1.0 + xp.tanh(u))).astype(x.dtype, copy=False)
    return (x * normal_cdf(x)).astype(x.dtype, copy=False)


@registry.reference("gelu.backward")
def gelu_backward(gy: np.ndarray, x: np.ndarray, approximate: str) -> np.ndarray:
    xp = backend.get_array_module(x)
    if approximate == "tanh":
        th = xp.tanh(_SQRT_2_OVER_PI * (x + _TANH_C * x * x * x))
        du = _SQRT_2_OVER_PI * (1.0 + 3.0 * _TANH_C * x * x)
        dy = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du
    else:
        dy = normal_cdf(x) + x * _INV_SQRT_2PI * xp.exp(-0.5 * x * x)
    return (gy * dy).astype(gy.dtype, copy=False)


class GELU(Function):
    @staticmethod
    def forward(ctx, x, *, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        return registry.call("gelu.forward", x, approximate)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return registry.call("gelu.backward", gy, x, ctx.approximate)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU, `x * Phi(x)`; `approximate="tanh"` gives the GPT-2 tanh form."""
    if approximate not in ("none", "tanh"):
        raise OpError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return GELU.apply(x, approximate=approximate)


def _sample(draw) -> Sample:
    x = floats(draw, draw.shape(min_dims=0), -4.0, 4.0)
    return Sample([x], {"approximate": draw.choice(["none", "tanh"])})


SPECS = [
    OpSpec("gelu", gelu, _sample, functions=(GELU,), primitives=("gelu.forward", "gelu.backward"))
]
