"""expand: broadcast x to a larger shape without copying (-1 keeps an axis as it is).

Forward   y = broadcast_to(x, s)
Backward  gx = unbroadcast(gy, shape(x)): the copies' gradients are summed
Saved     the input shape.
"""

from __future__ import annotations

from typing import Any

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcastable, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import shape_arg

__all__ = ["expand"]


class Expand(Function):
    @staticmethod
    def forward(ctx, x, *, shape):
        lead = len(shape) - x.ndim
        if lead < 0:
            raise OpError(f"expand: cannot expand shape {x.shape} to fewer dimensions {shape}")
        shape = tuple(x.shape[i - lead] if n == -1 else n for i, n in enumerate(shape))
        ctx.x_shape = x.shape
        xp = backend.get_array_module(x)
        return xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, gy):
        return unbroadcast(gy, ctx.x_shape)


def expand(x: Tensor, *shape: Any) -> Tensor:
    """Broadcast `x` to `shape` (a view; -1 keeps that axis's size)."""
    return Expand.apply(x, shape=shape_arg(shape))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    return Sample([floats(draw, broadcastable(draw, shape))], {"shape": shape})


SPECS = [OpSpec("expand", lambda x, shape: expand(x, shape), _sample, functions=(Expand,))]
