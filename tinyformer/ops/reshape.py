"""reshape: the same elements in a new shape (one axis may be -1, inferred).

Forward   y = x viewed with shape s (a view when the memory layout allows, else a copy)
Backward  gx = gy reshaped to shape(x)
Saved     the input shape.
"""

from __future__ import annotations

import math
from typing import Any

from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import shape_arg

__all__ = ["flatten", "reshape"]


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


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Axes start_dim..end_dim (both included) merged into one, as `torch.flatten`: a reshape."""
    shape = x.shape or (1,)  # a 0-d tensor flattens to (1,)
    ndim = len(shape)
    for name, value in (("start_dim", start_dim), ("end_dim", end_dim)):
        if not -ndim <= value < ndim:
            raise OpError(f"flatten: {name}={value} is out of range for shape {x.shape}")
    first, last = start_dim % ndim, end_dim % ndim
    if first > last:
        raise OpError(f"flatten: start_dim={start_dim} comes after end_dim={end_dim}")
    merged = math.prod(shape[first : last + 1])
    return reshape(x, *shape[:first], merged, *shape[last + 1 :])  # (..., d_first...d_last, ...)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    n = 1
    for side in shape:
        n *= side
    target = draw.choice([(n,), (-1,), (1, n), (n, 1, 1)])
    return Sample([floats(draw, shape)], {"shape": target})


def _flatten_sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    ndim = max(len(shape), 1)
    start = draw.integers(-ndim, ndim - 1)
    end = draw.integers(start % ndim, ndim - 1)
    return Sample([floats(draw, shape)], {"start_dim": start, "end_dim": end})


SPECS = [
    OpSpec("reshape", lambda x, shape: reshape(x, shape), _sample, functions=(Reshape,)),
    OpSpec("flatten", flatten, _flatten_sample, functions=(Reshape,)),
]
