"""getitem and setitem: `x[index]`, and the write `x[index] = v` recorded in the graph. An index
holds slices, integers, None, Ellipsis, integer arrays and boolean masks.

getitem
Forward   y = x[index]
Backward  gx = zeros like x, then gy scattered back to where each element came from:
          basic indexing (slices, ints) and boolean masks pick each element at most once, so
          `gx[index] = gy` suffices; integer arrays may pick an element several times, so the
          gradients are scatter-added (`xp.add.at`), which sums repeated positions.
Saved     the index and the input's shape and dtype.

setitem (IndexPut: what `x[index] = v` records when x has a history or v requires grad)
Forward   x[index] = v in x's own memory (v broadcast to the shape of x[index], cast to x's
          dtype). The node's output is x itself: `Tensor.__setitem__` rebases x's history onto
          the node, as PyTorch does, and bumps x's version counter, so that a node that saved
          x's old values refuses to run its backward.
Backward  gx = gy with the written positions zeroed (their old values were overwritten);
          gv = gy[index], summed over the axes v was broadcast along.
          Repeated positions (an integer array naming one element twice): the write keeps one
          of the values (the last on the CPU; which one is unspecified on a GPU), and every
          value gets the gradient of the position it was written to, the overwritten ones too.
          That is PyTorch's `index_put_` without accumulate, chosen so that code ported from
          PyTorch gets its gradients; finite differences would give the overwritten ones 0.
Saved     the index and v's shape (neither x nor v: the backward only needs where v went).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.indexing import has_integer_array, normalize_index
from tinyformer.ops._util import unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcastable, floats
from tinyformer.tensor import Tensor

__all__ = ["getitem"]


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
        if has_integer_array(ctx.index):
            xp.add.at(gx, ctx.index, gy)
        else:
            gx[ctx.index] = gy
        return gx


class IndexPut(Function):
    @staticmethod
    def forward(ctx, x, v, *, index):
        ctx.index, ctx.v_shape = index, getattr(v, "shape", ())
        x[index] = v
        return x

    @staticmethod
    def backward(ctx, gy):
        gx = gv = None
        if ctx.needs_input_grad[0]:
            gx = gy.copy()
            gx[ctx.index] = 0
        if ctx.needs_input_grad[1]:
            gv = unbroadcast(gy[ctx.index], ctx.v_shape)
        return gx, gv


def getitem(x: Tensor, index: Any) -> Tensor:
    """`x[index]`, differentiable; repeated integer indices accumulate their gradients."""
    return GetItem.apply(x, index=normalize_index(x.data, index))


def index_put(x: Tensor, index: Any, value: Any) -> Tensor:
    """Write `value` into `x[index]`, in x's memory, through an IndexPut node; returns the
    node's output, a Tensor on x's memory. What `x[index] = value` runs when the write is
    recorded (which also rebases x onto the node and bumps its version): write that instead.
    `index` is normalized (`tinyformer.indexing`), `value` on x's device."""
    return IndexPut.apply(x, value, index=index)


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


def _written(x: Tensor, v: Tensor, index: Any) -> Tensor:
    # The generic tests need a function of its inputs: write into a copy of x (a write into x
    # itself would change the sample), recorded since the copy has a history.
    out = x.clone()
    out[index] = v
    return out


def _setitem_sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=3, max_side=5)
    n = shape[0]
    kind = draw.choice(["slice", "int", "array", "mask", "mixed"])
    # Distinct positions in integer arrays: with repeats the write keeps one value, and the
    # gradient PyTorch gives the others is no derivative (tests/test_inplace.py compares it).
    if kind == "slice":
        index = (slice(draw.integers(0, n - 1), None, draw.choice([1, 2])), Ellipsis)
    elif kind == "int":
        index = draw.integers(-n, n - 1)
    elif kind == "array":
        index = draw.rng.permutation(n)[: draw.integers(1, n)]
    elif kind == "mask":  # one True at least: an empty part would make v empty
        index = draw.rng.random(shape) < 0.5
        index.flat[draw.integers(0, index.size - 1)] = True
    elif len(shape) == 1:
        index = (slice(None, None, -1), None)
    else:
        index = (draw.rng.permutation(n)[: draw.integers(1, n)], slice(None, None, -1))
    part = np.empty(shape)[index].shape
    return Sample([floats(draw, shape), floats(draw, broadcastable(draw, part))], {"index": index})


SPECS = [
    OpSpec("getitem", getitem, _sample, functions=(GetItem,)),
    OpSpec("setitem", _written, _setitem_sample, functions=(IndexPut,)),
]
