"""reshape: the same elements in a new shape (one axis may be -1, inferred).

Forward   y = x viewed with shape s (a view when the memory layout allows, else a copy)
Backward  gx = gy reshaped to shape(x)
Saved     the input shape.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import shape_arg
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample, floats


class Reshape(Function):
    @staticmethod
    def forward(ctx, x, *, shape):
        ctx.x_shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, gy):
        return gy.reshape(ctx.x_shape)


def reshape(x: Tensor, *shape: Any) -> Tensor:
    """`x` with a new shape; `reshape(x, 2, -1)` and `reshape(x, (2, -1))` both work."""
    return Reshape.apply(x, shape=shape_arg(shape))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    n = 1
    for side in shape:
        n *= side
    target = draw.choice([(n,), (-1,), (1, n), (n, 1, 1)])
    return Sample([floats(draw, shape)], {"shape": target})


SPECS = [OpSpec("reshape", lambda x, shape: reshape(x, shape), _sample, functions=(Reshape,))]
