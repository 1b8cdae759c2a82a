"""getitem: `x[index]` with slices, integers, None, Ellipsis, integer arrays and boolean masks.

Forward   y = x[index]
Backward  gx = zeros like x, then gy scattered back to where each element came from:
          basic indexing (slices, ints) and boolean masks pick each element at most once, so
          `gx[index] = gy` suffices; integer arrays may pick an element several times, so the
          gradients are scatter-added (`xp.add.at`), which sums repeated positions.
Saved     the index and the input's shape and dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample, floats

__all__ = ["getitem"]


def _is_array(p: Any) -> bool:
    return isinstance(p, np.ndarray) or backend.is_device_array(p)


def _normalize_index(x: Tensor, index: Any) -> Any:
    """Tensors and lists inside an index become arrays on x's device, so the array module sees
    advanced indexing; Tensors must be there already, host data is moved there."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if isinstance(p, Tensor):
            backend.check_same_device("getitem", x.data, p.data)
            p = p.data
        elif isinstance(p, list) or _is_array(p):
            p = backend.to_device(p, x.device)
        out.append(p)
    return tuple(out) if isinstance(index, tuple) else out[0]


def _has_integer_array(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(_is_array(p) and p.dtype.kind in "iu" for p in parts)


class GetItem(Function):
    @staticmethod
    def forward(ctx, x, *, index):
        ctx.index = index
        ctx.x_shape, ctx.x_dtype = x.shape, x.dtype
        return x[index]

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        gx = xp.zeros(ctx.x_shape, ctx.x_dtype)
        if _has_integer_array(ctx.index):
            xp.add.at(gx, ctx.index, gy)
        else:
            gx[ctx.index] = gy
        return gx


def getitem(x: Tensor, index: Any) -> Tensor:
    """`x[index]`, differentiable; repeated integer indices accumulate their gradients."""
    return GetItem.apply(x, index=_normalize_index(x, index))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=3, max_side=5)
    n = shape[0]
    kind = draw.choice(["slice", "int", "array", "mask", "mixed"])
    if kind == "slice":
        index = (slice(draw.integers(0, n - 1), None, draw.choice([1, 2])), Ellipsis)
    elif kind == "int":
        index = draw.integers(-n, n - 1)
    elif kind == "array":  # repeats on purpose: the backward must sum them
        index = draw.rng.integers(0, n, size=draw.integers(1, 6))
    elif kind == "mask":
        index = draw.rng.random(shape) < 0.5
    else:
        index = (
            (slice(None), None, Ellipsis)
            if len(shape) == 1
            else (
                draw.rng.integers(0, n, size=3),
                slice(None, None, -1),
            )
        )
    return Sample([floats(draw, shape)], {"index": index})


SPECS = [OpSpec("getitem", getitem, _sample, functions=(GetItem,))]
