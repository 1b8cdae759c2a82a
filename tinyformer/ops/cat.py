"""cat (concatenate) and stack: join tensors along an axis.

Forward   y = [x_1, x_2, ..., x_n] laid end to end along `axis`
Backward  gx_i = the slice of gy that x_i filled (gy split at the same offsets)
Saved     the split offsets along `axis`.

stack(xs, axis) is cat of the inputs each unsqueezed at `axis`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import normalize_axes
from tinyformer.ops.squeeze import unsqueeze
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["cat", "concatenate", "stack"]


class Cat(Function):
    @staticmethod
    def forward(ctx, *xs, axis):
        ndim = xs[0].ndim
        if ndim == 0 or not -ndim <= axis < ndim:
            raise OpError(f"cat: axis {axis} is out of range for inputs of shape {xs[0].shape}")
        axis %= ndim
        for x in xs[1:]:
            if x.ndim != ndim or x.shape[:axis] + x.shape[axis + 1 :] != (
                xs[0].shape[:axis] + xs[0].shape[axis + 1 :]
            ):
                shapes = ", ".join(str(x.shape) for x in xs)
                raise OpError(f"cat: shapes {shapes} differ outside axis {axis}")
        xp = backend.get_array_module(*xs)
        ctx.axis = axis
        # Python ints: split points any array module takes (a host array would not reach a GPU)
        ctx.offsets = list(itertools.accumulate(x.shape[axis] for x in xs))[:-1]
        return xp.concatenate(xs, axis=axis)

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        return tuple(xp.split(gy, ctx.offsets, axis=ctx.axis))


@torch_names
def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Concatenate along an existing axis (`torch.cat`, `numpy.concatenate`)."""
    if len(tensors) == 0:
        raise OpError("cat: needs at least one tensor")
    return Cat.apply(*tensors, axis=axis)


concatenate = cat


@torch_names
def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join along a new axis; all tensors must have the same shape."""
    if len(tensors) == 0:
        raise OpError("stack: needs at least one tensor")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise OpError(f"stack: all tensors need the same shape, got {sorted(shapes)}")
    normalize_axes(axis, len(shapes.pop()) + 1, "stack")  # the result's axes: any may be new
    return cat([unsqueeze(t, axis) for t in tensors], axis=axis)


def _sample_cat(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    axis = draw.integers(-len(shape), len(shape) - 1)
    xs = []
    for _ in range(draw.integers(1, 3)):
        s = list(shape)
        s[axis] = draw.integers(1, 3)
        xs.append(floats(draw, tuple(s)))
    return Sample(xs, {"axis": axis})


def _sample_stack(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    xs = [floats(draw, shape) for _ in range(draw.integers(1, 3))]
    return Sample(xs, {"axis": draw.integers(-len(shape) - 1, len(shape))})


SPECS = [
    OpSpec("cat", lambda *xs, axis: cat(xs, axis), _sample_cat, functions=(Cat,)),
    OpSpec("stack", lambda *xs, axis: stack(xs, axis), _sample_stack, functions=(Cat,)),
]
