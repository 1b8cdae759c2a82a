"""split and chunk: cut a tensor into pieces along an axis.

Shapes    x (..., n, ...) -> pieces (..., n_i, ...) with sum n_i = n, along `axis`
Forward   piece_i = x[..., start_i : start_i + n_i, ...], a view (no copy)
Backward  gx = the pieces' gradients side by side along `axis` (one concatenation; none when
          they already lie side by side in one array, as the attention kernel returns them)
Saved     the axis and x's shape.

One Function with several outputs rather than one slice (`GetItem`) per piece: a slice's
backward must build a zero gradient of x's full shape and write its piece into it, and the
engine then adds the full-size gradients of the pieces together. Here the backward writes each
element of gx once. A piece that does not reach the loss gets a zero gradient from the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops.cat import cat
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["chunk", "split"]


class Split(Function):
    @staticmethod
    def forward(ctx, x, *, sizes, axis):
        ctx.axis, ctx.shape = axis, x.shape
        index = [slice(None)] * x.ndim
        pieces, start = [], 0
        for size in sizes:
            index[axis] = slice(start, start + size)
            pieces.append(x[tuple(index)])
            start += size
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *gys):
        xp = backend.get_array_module(*gys)
        whole = _side_by_side(gys, ctx.axis, ctx.shape)
        return xp.concatenate(gys, axis=ctx.axis) if whole is None else whole


def _side_by_side(gys, axis: int, shape: tuple[int, ...]) -> np.ndarray | None:
    """The array of x's shape whose consecutive slices along `axis` the gradients are, if they
    are: their concatenation, without copying them. (The attention kernel hands back Q, K and
    V's gradients that way when Q, K and V were split from one projection.) Else None."""
    if not isinstance(gys[0], np.ndarray):
        return None  # on a device: that kernel runs on the host, and this reads host addresses
    owner = gys[0].base
    if owner is None or not owner.flags.c_contiguous or owner.size != math.prod(shape):
        return None
    whole = owner.reshape(shape)
    index, start = [slice(None)] * len(shape), 0
    for g in gys:
        index[axis] = slice(start, start + g.shape[axis])
        piece, start = whole[tuple(index)], start + g.shape[axis]
        if g.base is not owner or g.dtype != piece.dtype or g.shape != piece.shape:
            return None
        same_place = g.__array_interface__["data"][0] == piece.__array_interface__["data"][0]
        if g.strides != piece.strides or not same_place:
            return None
    return whole


@torch_names
def split(x: Tensor, split_size_or_sections: int | Sequence[int], axis: int = 0) -> list[Tensor]:
    """Pieces of `split_size` along `axis` (the last may be smaller), or of the given sizes,
    as `torch.split`."""
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise OpError(f"split: axis {axis} is out of range for shape {x.shape}")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise OpError(f"split: split_size must be positive, got {step}")
        sizes = [min(step, n - start) for start in range(0, n, step)]
    else:
        sizes = list(split_size_or_sections)
        if min(sizes, default=0) < 0:
            raise OpError(f"split: sizes must not be negative, got {sizes}")
        if sum(sizes) != n:
            raise OpError(f"split: sizes {sizes} do not add up to {n} (axis {axis} of {x.shape})")
    return list(Split.apply(x, sizes=tuple(sizes), axis=axis % x.ndim))


@torch_names
def chunk(x: Tensor, chunks: int, axis: int = 0) -> list[Tensor]:
    """At most `chunks` pieces of equal size (the last may be smaller), as `torch.chunk`."""
    if chunks <= 0:
        raise OpError(f"chunk: chunks must be positive, got {chunks}")
    if x.ndim and not -x.ndim <= axis < x.ndim:  # (split names the axis for a 0-d tensor)
        raise OpError(f"chunk: axis {axis} is out of range for shape {x.shape}")
    n = x.shape[axis] if x.ndim else 0
    return split(x, max(1, -(-n // chunks)), axis)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_side=5)
    axis = draw.integers(-len(shape), len(shape) - 1)
    return Sample([floats(draw, shape)], {"size": draw.integers(1, 3), "axis": axis})


def _concat_pieces(pieces: list[Tensor]) -> Tensor:
    # The generic tests need one output: weight the pieces differently so a swap would show.
    return cat([reshape(p * (i + 1), -1) for i, p in enumerate(pieces)])


SPECS = [
    OpSpec(
        "split",
        lambda x, size, axis: _concat_pieces(split(x, size, axis)),
        _sample,
        functions=(Split,),
    ),
    OpSpec(
        "chunk",
        lambda x, size, axis: _concat_pieces(chunk(x, size, axis)),
        _sample,
        functions=(Split,),
    ),
]
