"""celu: the continuously differentiable ELU (Barron, 2017): unlike elu, its slope at 0 is 1
for every alpha.

Forward   y = x where x > 0, else alpha (e^(x / alpha) - 1), with e^(min(x, 0) / alpha): the
          branch not taken stays finite, so its zero gradient does not become 0 * inf.
Backward  through the ops it is made of (where, minimum, exp): 1 above 0, e^(x / alpha) below.
          (PyTorch's backward divides by alpha rounded to float32, so for an alpha float32
          cannot hold, such as 0.7, its float64 gradient is ~1e-8 (relative) off this one.)
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.exp import exp
from tinyformer.ops.maximum import minimum
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["celu"]


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """`input` where positive, else `alpha (exp(input / alpha) - 1)`. `inplace` is accepted
    for PyTorch's signature; the result is a new tensor."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha == 0:
        raise OpError(f"celu: alpha must be a nonzero number, got {alpha!r}")
    # times 1 / alpha, not / alpha: PyTorch scales the input so, and the values then agree
    below = (exp(minimum(input, 0.0) * (1.0 / alpha)) - 1.0) * alpha
    return where(input.data > 0, input, below)


def _sample(draw) -> Sample:
    x = floats(draw, draw.shape(min_dims=0), -3.0, 3.0, avoid=(0.0,))
    return Sample([x], {"alpha": draw.choice([1.0, 0.5, 2.0])})


SPECS = [OpSpec("celu", celu, _sample)]
