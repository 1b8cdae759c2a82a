"""gelu: Gaussian error linear unit, exact (erf) form and tanh approximation.

Forward   exact:  y = x * Phi(x),   Phi(x) = P(N(0,1) <= x) = erfc(-x / sqrt 2) / 2
          tanh:   y = x/2 * (1 + tanh(u)),   u = sqrt(2/pi) * (x + 0.044715 x^3)
Backward  exact:  gx = gy * (Phi(x) + x * phi(x)),   phi(x) = exp(-x^2/2) / sqrt(2 pi)
          tanh:   gx = gy * (1/2 (1 + tanh u) + x/2 (1 - tanh^2 u) u'),
                  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
Saved     x: recomputing Phi or tanh(u) in backward is cheaper than storing a second array.

NumPy has no erf: `erfc` comes from the erf op (`tinyformer/ops/erf.py`), whose absolute error
is below 2e-15 everywhere: float64 accuracy, so the exact form passes float64 gradchecks with
room to spare.
"""

from __future__ import annotations

import math

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops.erf import erfc
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["gelu"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = 0.044715


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
