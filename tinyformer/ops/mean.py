"""mean: average of the elements over `axis` (None: all of them).

Forward   y = (1/n) sum_{i in axis} x_i,   n = number of elements reduced
Backward  gx = broadcast(gy) / n
Saved     the input shape, the reduced axes and n.
"""

from __future__ import annotations

import math
from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.opspec import OpSpec, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["mean"]


class Mean(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        ctx.x_shape, ctx.axes, ctx.keepdims = x.shape, axis, keepdims
        ctx.n = math.prod(x.shape[a] for a in axis)
        return x.mean(axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, gy):
        return expand_reduced(gy / ctx.n, ctx.x_shape, ctx.axes, ctx.keepdims)


@torch_names
def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis` (an int, a tuple, or None for all)."""
    return Mean.apply(x, axis=normalize_axes(axis, x.ndim, "mean"), keepdims=keepdims)


SPECS = [OpSpec("mean", mean, reduction_sample(), functions=(Mean,))]
