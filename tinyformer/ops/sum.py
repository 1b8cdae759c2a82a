"""sum: add the elements over `axis` (None: all of them).

Forward   y = sum_{i in axis} x_i
Backward  gx = broadcast(gy) back to shape(x): every summed element gets the same gradient
Saved     the input shape and the reduced axes.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.opspec import OpSpec, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["sum"]


class Sum(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.x_shape, ctx.axes, ctx.keepdims = x.shape, axis, keepdims
        return x.sum(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, gy):
        return expand_reduced(gy, ctx.x_shape, ctx.axes, ctx.keepdims)


@torch_names
def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over `axis` (an int, a tuple, or None for all)."""
    return Sum.apply(x, axis=normalize_axes(axis, x.ndim, "sum"), keepdims=keepdims)


SPECS = [OpSpec("sum", sum, reduction_sample(), functions=(Sum,))]
