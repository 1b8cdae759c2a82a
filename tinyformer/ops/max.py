"""max and min reductions over `axis` (values only; NumPy's `amax` / `amin`), and argmax /
argmin, their positions (integers: no gradient).

Forward   y = max_{i in axis} x_i                 (min(x) = -max(-x))
Backward  the gradient goes to the maximal elements. At ties, it is split evenly among all the
          elements equal to the maximum: gx = gy * [x == y] / count(x == y). This is PyTorch's
          `amax` rule, and the average of the one-sided derivatives: moving any one tied element
          up moves the max, moving it down does not.
Saved     x and y (with the reduced axes kept), to find the maximal elements.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.ops.neg import neg
from tinyformer.opspec import OpSpec, distinct, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import max_names, torch_names

__all__ = ["argmax", "argmin", "max", "min"]


class Max(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        if x.size == 0:
            raise OpError(f"max: cannot reduce an empty tensor of shape {x.shape}")
        y = x.max(axis=axis, keepdims=True)
        ctx.axes, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(x, y)
        return y if keepdims else y.squeeze(axis)

    @staticmethod
    def backward(ctx, gy):
        x, y = ctx.saved_tensors
        is_max = x == y
        count = is_max.sum(axis=ctx.axes, keepdims=True)
        g = expand_reduced(gy, x.shape, ctx.axes, ctx.keepdims)
        return (g * is_max / count).astype(gy.dtype, copy=False)


@max_names
def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Largest element over `axis`; ties share the gradient evenly."""
    return Max.apply(x, axis=normalize_axes(axis, x.ndim, "max"), keepdims=keepdims)


@max_names
def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Smallest element over `axis`, as `-max(-x)`."""
    return neg(max(neg(x), axis, keepdims))


def _arg(op: str, x: Tensor, axis: int | None, keepdims: bool) -> Tensor:
    if x.size == 0:
        raise OpError(f"{op}: cannot search an empty tensor of shape {x.shape}")
    if axis is not None:
        (axis,) = normalize_axes(axis, x.ndim, op)
    xp = backend.get_array_module(x.data)
    pick = xp.argmax if op == "argmax" else xp.argmin
    return Tensor(pick(x.data, axis=axis, keepdims=keepdims).astype(np.int64, copy=False))


@torch_names
def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the largest element (of the flattened tensor, or along `axis`), int64; the
    first one at ties."""
    return _arg("argmax", x, axis, keepdims)


@torch_names
def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the smallest element (of the flattened tensor, or along `axis`), int64."""
    return _arg("argmin", x, axis, keepdims)


SPECS = [
    OpSpec("max", max, reduction_sample(distinct), functions=(Max,)),
    OpSpec("min", min, reduction_sample(distinct), functions=(Max,)),
]
