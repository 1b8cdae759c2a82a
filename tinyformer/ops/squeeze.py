"""squeeze and unsqueeze: remove or insert size-1 axes.

Both are reshapes, so they reuse `Reshape` (its backward reshapes the gradient back); this file
only works out the new shape and checks the axis.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import OpError
from tinyformer.ops._util import normalize_axes
from tinyformer.ops.reshape import Reshape
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["squeeze", "unsqueeze"]


@torch_names
def squeeze(x: Tensor, axis: Any = None) -> Tensor:
    """Remove size-1 axes (all of them, or those in `axis`)."""
    if axis is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    else:
        axes = normalize_axes(axis, x.ndim, "squeeze")
        for a in axes:
            if x.shape[a] != 1:
                raise OpError(f"squeeze: axis {a} of shape {x.shape} has size {x.shape[a]}, not 1")
    shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return Reshape.apply(x, shape=shape)


@torch_names
def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """Insert a size-1 axis at position `axis` (negative counts from the new end)."""
    ndim = x.ndim + 1
    if not -ndim <= axis < ndim:
        raise OpError(f"unsqueeze: axis {axis} is out of range for a result of {ndim} dimensions")
    axis %= ndim
    return Reshape.apply(x, shape=(*x.shape[:axis], 1, *x.shape[axis:]))


def _sample_squeeze(draw) -> Sample:
    shape = tuple(draw.choice([1, 2, 3]) for _ in range(draw.integers(0, 4)))
    ones = [i for i, n in enumerate(shape) if n == 1]
    axis = draw.choice([None, *ones])
    return Sample([floats(draw, shape)], {"axis": axis})


def _sample_unsqueeze(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    return Sample([floats(draw, shape)], {"axis": draw.integers(-len(shape) - 1, len(shape))})


SPECS = [
    OpSpec("squeeze", squeeze, _sample_squeeze, functions=(Reshape,)),
    OpSpec("unsqueeze", unsqueeze, _sample_unsqueeze, functions=(Reshape,)),
]
