"""scatter: write values into a copy of x at positions given by an index along an axis
(`torch.scatter`, `x.scatter(dim, index, src)`); the inverse placement of gather.

Forward   y = x,  then  y[index[i, j, k], j, k] = src[i, j, k]   (axis 0; likewise any axis):
          index has x's rank, is no longer than src along any axis and no longer than x along
          the axes other than `axis`; src may be a number (every written position gets it).
          Where index repeats a position, one of the writes wins (PyTorch does not say which;
          here the last one).
Backward  a written position of y came from src, every other from x:
              gx = gy with the written positions set to 0,
              gsrc[i, j, k] = gy[index[i, j, k], j, k]    (a gather of gy; 0 where src is
                                                           longer than index),
          PyTorch's rule, which with a repeated position also sends gy to the writes that lost.
Saved     index (the positions), and the shapes of x and src.

One-hot targets, `torch.zeros(B, V).scatter(1, labels[:, None], 1.0)`, are the classic use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops.gather import _positions
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["scatter"]


class Scatter(Function):
    @staticmethod
    def forward(ctx, x, src, *, axis, index):
        ctx.axis, ctx.src_shape = axis, src.shape
        ctx.save_for_backward(index)
        y = x.copy()
        y[_positions(index, axis)] = src[tuple(slice(0, n) for n in index.shape)]
        return y

    @staticmethod
    def backward(ctx, gy):
        (index,) = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        where = _positions(index, ctx.axis)
        gx = None
        if ctx.needs_input_grad[0]:
            gx = gy.copy()
            gx[where] = 0
        gsrc = None
        if ctx.needs_input_grad[1]:
            gsrc = xp.zeros(ctx.src_shape, gy.dtype)
            gsrc[tuple(slice(0, n) for n in index.shape)] = gy[where]
        return gx, gsrc


@torch_names
def scatter(x: Tensor, axis: int, index: Any, src: Any = None, *, value: Any = None,
            reduce: str | None = None) -> Tensor:  # fmt: skip
    """A copy of x with `src`'s elements (or the number `src`/`value`) written at `index`
    along `axis` (`torch.scatter(x, dim, index, src)`). `reduce=` is refused: scatter with a
    reduction is another op in PyTorch (`scatter_add`, `scatter_reduce`)."""
    if reduce is not None:
        raise OpError(
            f"scatter: reduce={reduce!r} is not supported (PyTorch deprecates it); write the "
            "reduction out: scatter_add is x + zeros.scatter(...) when no position repeats"
        )
    if (src is None) == (value is None):
        raise OpError("scatter: give the values to write, as src (a tensor or number) or value")
    src = value if src is None else src
    index = _index(x, index)
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise OpError(f"scatter: axis {axis} is out of range for a tensor of shape {x.shape}")
    axis %= x.ndim
    if isinstance(src, Tensor) or isinstance(src, np.ndarray) or backend.is_device_array(src):
        if isinstance(src, Tensor):
            backend.check_same_device("scatter", x.data, src.data)
        else:
            src = backend.to_device(src, x.device)
        if src.ndim != x.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
            raise OpError(
                f"scatter: src {tuple(src.shape)} must have x's {x.ndim} axes and be at least "
                f"as long as index {index.shape} along each"
            )
        if src.dtype != x.dtype:
            raise OpError(f"scatter: src is {src.dtype} and x is {x.dtype}; they must agree")
    else:  # a number: every written position gets it
        xp = backend.get_array_module(x.data)
        src = xp.full(index.shape, src, dtype=x.dtype)
    if any(n > m for d, (n, m) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise OpError(
            f"scatter: index {index.shape} is longer than x {x.shape} along an axis other "
            f"than {axis}"
        )
    n = x.shape[axis]
    lo, hi = (int(index.min()), int(index.max())) if index.size else (0, 0)  # a sync on a GPU
    if not (0 <= lo and hi < n):
        bad = lo if lo < 0 else hi
        raise OpError(f"scatter: index {bad} is out of range for axis {axis} of length {n}")
    return Scatter.apply(x, src, axis=axis, index=index)


def _index(x: Tensor, index: Any) -> Any:
    """`index` as an integer array of x's rank, on x's device."""
    if isinstance(index, Tensor):  # indices live with the data, as in PyTorch
        backend.check_same_device("scatter", x.data, index.data)
        index = index.data
    elif not backend.is_device_array(index):  # host data from the user: onto x's device
        index = backend.to_device(np.asarray(index), x.device)
    if index.dtype.kind not in "iu" or index.ndim != x.ndim:
        raise OpError(
            f"scatter: index must be an integer array with x's {x.ndim} axes, got "
            f"{index.dtype} of shape {index.shape} (x {x.shape})"
        )
    return index


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=3)
    axis = draw.integers(0, len(shape) - 1)
    index_shape = [draw.integers(1, n) for n in shape]
    index_shape[axis] = draw.integers(1, shape[axis])
    # distinct positions along the axis, so that no write depends on which of two wins
    picks = np.argsort(draw.rng.random((*index_shape[:axis], shape[axis], *index_shape[axis + 1:])),
                       axis=axis)  # fmt: skip
    index = np.take(picks, np.arange(index_shape[axis]), axis=axis)
    src_shape = [n + draw.integers(0, 1) for n in index_shape]  # src may be longer than index
    return Sample(
        [floats(draw, shape), floats(draw, tuple(src_shape))],
        {"axis": axis - len(shape), "index": index},
    )


SPECS = [
    OpSpec(
        "scatter",
        lambda x, src, *, axis, index: scatter(x, axis, index, src),
        _sample,
        functions=(Scatter,),
    )
]
