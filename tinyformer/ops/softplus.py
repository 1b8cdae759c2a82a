"""softplus and elu: smooth rectifiers.

softplus  y = log(1 + e^(b x)) / b, and y = x where b x > threshold (PyTorch's linear tail),
          computed as (max(z, 0) + log(1 + e^-|z|)) / b with z = b x: no overflow for any x.
elu       y = x where x > 0, else alpha (e^x - 1), with e^min(x, 0): the branch not taken stays
          finite, so its zero gradient does not become 0 * inf.
Backward  through the ops they are made of (maximum, abs, exp, log1p, where): softplus'(x) =
          sigmoid(b x), elu'(x) = 1 above 0, alpha e^x below.
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.abs import abs
from tinyformer.ops.exp import exp
from tinyformer.ops.log1p import log1p
from tinyformer.ops.maximum import maximum, minimum
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["elu", "softplus"]


def _number(op: str, name: str, value: float, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OpError(f"{op}: {name} must be a number, got {value!r}")
    if positive and not value > 0:
        raise OpError(f"{op}: {name} must be > 0, got {value!r}")
    return float(value)


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """`log(1 + exp(beta x)) / beta`, linear (`x`) where `beta x > threshold`, as PyTorch's."""
    beta = _number("softplus", "beta", beta, positive=True)
    threshold = _number("softplus", "threshold", threshold)
    z = x * beta
    smooth = (maximum(z, 0.0) + log1p(exp(-abs(z)))) * (1.0 / beta)
    return where(z.data > threshold, x, smooth)


def elu(x: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """`x` where positive, else `alpha (exp(x) - 1)`. `inplace` is accepted for PyTorch's
    signature; the result is a new tensor."""
    alpha = _number("elu", "alpha", alpha)
    return where(x.data > 0, x, (exp(minimum(x, 0.0)) - 1.0) * alpha)


def _softplus_sample(draw) -> Sample:
    beta = draw.choice([1.0, 2.0, 0.5])
    x = floats(draw, draw.shape(min_dims=0), -6.0, 6.0, avoid=(20.0 / beta, 0.0))
    return Sample([x], {"beta": beta, "threshold": draw.choice([20.0, 2.0])})


def _elu_sample(draw) -> Sample:
    x = floats(draw, draw.shape(min_dims=0), avoid=(0.0,))
    return Sample([x], {"alpha": draw.choice([1.0, 0.5, 2.0])})


SPECS = [
    OpSpec("softplus", softplus, _softplus_sample),
    OpSpec("elu", elu, _elu_sample),
]
