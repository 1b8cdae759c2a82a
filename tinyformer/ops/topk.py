"""topk: the k largest (or smallest) elements along an axis, and where they were.

Forward   indices = the positions of the k largest x along `axis`, largest first (at ties, the
          earlier position first); values = x at those positions (a gather).
Backward  each value came from one element, and no element is taken twice along the axis, so
          the gradient goes straight back to the positions it came from:
          gx = 0 everywhere, gx[indices] = gy.
Saved     the indices and x's shape (not x: the backward only needs where the values were).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, distinct
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["topk"]


class TopKResult(NamedTuple):
    """`torch.topk`'s result: unpacks as `values, indices = topk(x, k)`."""

    values: Tensor
    indices: Tensor  # int64, no gradient


class TopK(Function):
    @staticmethod
    def forward(ctx, x, *, indices, axis):
        ctx.axis, ctx.x_shape = axis, x.shape
        xp = backend.get_array_module(x)
        ctx.save_for_backward(indices)
        return xp.take_along_axis(x, indices, axis=axis)

    @staticmethod
    def backward(ctx, gy):
        (indices,) = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        gx = xp.zeros(ctx.x_shape, gy.dtype)
        xp.put_along_axis(gx, indices, gy, axis=ctx.axis)  # distinct positions: no sums needed
        return gx


@torch_names
def topk(
    x: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True
) -> TopKResult:
    """The k largest elements along `axis` (the k smallest with `largest=False`) and their int64
    positions, as `torch.topk`; `values` is differentiable. They always come sorted, largest
    (or smallest) first: `sorted=False` allows any order, and this is one."""
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise OpError(f"topk: axis {axis} is out of range for a tensor of shape {x.shape}")
    n = x.shape[axis]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k <= n:
        raise OpError(
            f"topk: k must be an integer in [0, {n}] (axis {axis} of {x.shape}), got {k!r}"
        )
    xp = backend.get_array_module(x.data)
    order = xp.argsort(-x.data if largest else x.data, axis=axis, kind="stable")
    indices = xp.take(order, xp.arange(k), axis=axis)  # (..., k, ...): the first k of each line
    return TopKResult(TopK.apply(x, indices=indices, axis=axis), Tensor(indices.astype(np.int64)))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_side=5)
    axis = draw.integers(-len(shape), len(shape) - 1)
    k = draw.integers(1, shape[axis])
    return Sample(
        [distinct(draw, shape)], {"k": k, "axis": axis, "largest": bool(draw.integers(0, 1))}
    )


def _weighted(x: Tensor, k: int, axis: int, largest: bool) -> Tensor:
    # The generic tests need one output: each value times (1 + its position), so that a wrong
    # index shows as a wrong value.
    values, indices = topk(x, k, axis, largest)
    return values * (indices.data.astype(x.dtype) + 1)


SPECS = [OpSpec("topk", _weighted, _sample, functions=(TopK,))]
