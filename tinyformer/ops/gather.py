"""gather: pick elements along an axis by index (`torch.gather`, NumPy's `take_along_axis`).

Forward   y[i, j, k] = x[index[i, j, k], j, k]   (axis 0; likewise for any axis):
          y has index's shape, and along every other axis index may be shorter than x (the
          first positions of x are used), as in PyTorch.
Backward  each y element is one x element, but one x element may be picked several times
          (a repeated index), and then it fed several outputs: its gradient is their sum,
              gx = 0,  gx[index[i, j, k], j, k] += gy[i, j, k],
          a scatter-add (`xp.add.at`: a plain assignment would keep only one of the repeats).
Saved     index and x's shape (not x: the backward only needs where the values came from).

The classic use: the log-probability of each target, `logp.gather(-1, target[..., None])`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["gather"]


def _positions(index: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """Full coordinates into x of every index element: index itself along `axis`, its own
    coordinates along the others."""
    xp = backend.get_array_module(index)
    # an open grid, as np.indices(shape, sparse=True) makes (CuPy's indices has no sparse=)
    grid = list(xp.ix_(*(xp.arange(n) for n in index.shape)))
    grid[axis] = index
    return tuple(grid)


class Gather(Function):
    @staticmethod
    def forward(ctx, x, *, axis, index):
        ctx.axis, ctx.x_shape = axis, x.shape
        ctx.save_for_backward(index)
        return x[_positions(index, axis)]

    @staticmethod
    def backward(ctx, gy):
        (index,) = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        gx = xp.zeros(ctx.x_shape, gy.dtype)
        xp.add.at(gx, _positions(index, ctx.axis), gy)  # repeated indices add up
        return gx


@torch_names
def gather(x: Tensor, axis: int, index: Any) -> Tensor:
    """x's elements at `index` along `axis` (`torch.gather(x, dim, index)`): the result has
    index's shape; index is an integer array of x's rank, no longer than x along other axes."""
    if isinstance(index, Tensor):  # indices live with the data, as in PyTorch
        backend.check_same_device("gather", x.data, index.data)
        index = index.data
    else:  # host data from the user: onto x's device
        index = backend.to_device(index, x.device)
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise OpError(f"gather: axis {axis} is out of range for a tensor of shape {x.shape}")
    if index.dtype.kind not in "iu" or index.ndim != x.ndim:
        raise OpError(
            f"gather: index must be an integer array with x's {x.ndim} axes, got "
            f"{index.dtype} of shape {index.shape} (x {x.shape})"
        )
    axis %= x.ndim
    if any(n > m for d, (n, m) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise OpError(
            f"gather: index {index.shape} is longer than x {x.shape} along an axis other than "
            f"{axis}"
        )
    n = x.shape[axis]
    lo, hi = (int(index.min()), int(index.max())) if index.size else (0, 0)  # a sync on a GPU
    if not (0 <= lo and hi < n):
        bad = lo if lo < 0 else hi
        raise OpError(f"gather: index {bad} is out of range for axis {axis} of length {n}")
    return Gather.apply(x, axis=axis, index=index)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=3)
    axis = draw.integers(0, len(shape) - 1)
    index_shape = [draw.integers(1, n) for n in shape]
    index_shape[axis] = draw.integers(1, 5)  # longer than x's axis: repeats are certain
    index = draw.rng.integers(0, shape[axis], size=index_shape)
    return Sample([floats(draw, shape)], {"axis": axis - len(shape), "index": index})


SPECS = [OpSpec("gather", gather, _sample, functions=(Gather,))]
