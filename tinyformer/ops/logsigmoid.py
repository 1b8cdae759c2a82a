"""logsigmoid: log(sigmoid(x)), the log-probability of a logistic unit.

Forward   y = min(x, 0) - log(1 + e^-|x|): the naive log(1 / (1 + e^-x)) overflows e^-x for
          large negative x and rounds sigmoid(x) to 1 (y to 0, its gradient to 0) for large
          positive x; this form keeps every exponent <= 0.
Backward  through the ops it is made of (minimum, abs, exp, log1p): y' = 1 - sigmoid(x)
          = sigmoid(-x). At x = 0, minimum's tie gives 1/2 and abs's 0, so y'(0) = 1/2.
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.ops.abs import abs
from tinyformer.ops.exp import exp
from tinyformer.ops.log1p import log1p
from tinyformer.ops.maximum import minimum
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["logsigmoid"]


def logsigmoid(input: Tensor) -> Tensor:  # noqa: A002 (named as in PyTorch)
    """`log(sigmoid(input))`, finite and accurate for any input."""
    return minimum(input, 0.0) - log1p(exp(-abs(input)))


def _sample(draw) -> Sample:
    return Sample([floats(draw, draw.shape(min_dims=0), -8.0, 8.0)])


SPECS = [OpSpec("logsigmoid", logsigmoid, _sample)]
