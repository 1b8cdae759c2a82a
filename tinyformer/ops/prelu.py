"""prelu: a leaky rectifier whose slope below 0 is learned, one per channel or one for all
(He et al., 2015).

Shapes    x (N, C, ...) or any shape with a single slope; weight (C,) or (1,)
Forward   y = max(x, 0) + a_c min(x, 0), a_c the slope of x's channel (axis 1)
Backward  through the ops it is made of: gx = gy where x > 0, a_c gy below;
          ga_c = sum of gy min(x, 0) over the channel's elements
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.maximum import maximum, minimum
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["prelu"]


def prelu(x: Tensor, weight: Tensor) -> Tensor:
    """`max(x, 0) + weight * min(x, 0)`, weight's slopes along axis 1 (or one for all)."""
    if weight.ndim != 1:
        raise OpError(f"prelu: weight must be 1-D, (C,) or (1,), got shape {weight.shape}")
    slopes = weight.shape[0]
    if slopes != 1:
        if x.ndim < 2 or x.shape[1] != slopes:
            raise OpError(
                f"prelu: {slopes} slopes need {slopes} channels on axis 1 of the input, got "
                f"shape {x.shape}"
            )
        weight = reshape(weight, slopes, *([1] * (x.ndim - 2)))  # (C, 1, ...) against (N, C, ...)
    return maximum(x, 0.0) + weight * minimum(x, 0.0)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=2)
    x = floats(draw, shape, avoid=(0.0,))
    slopes = draw.choice([1, shape[1]])
    return Sample([x, floats(draw, (slopes,))])


SPECS = [OpSpec("prelu", prelu, _sample)]
