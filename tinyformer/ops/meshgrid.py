"""meshgrid: coordinate grids from 1-d tensors, as `torch.meshgrid`.

Shapes    x_k (n_k,) for k = 1..N -> N grids, each (n_1, ..., n_N) with indexing="ij";
          with indexing="xy" the first two axes are swapped: (n_2, n_1, n_3, ..., n_N)
Forward   grid_k[i_1, ..., i_N] = x_k[i_k]: x_k broadcast along every other axis
Backward  gx_k = the sum of g_k over every axis but x_k's own: broadcasting's one rule
Saved     the axis each input lies along.

One Function with N outputs: each input is read only by its own grid, so each gradient is one
reduction. PyTorch's default indexing is "ij" (matrix indexing); NumPy's is "xy".
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops.cat import cat
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import Draw, OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["meshgrid"]


def _axis_of(k: int, n: int, indexing: str) -> int:
    """The axis of the grids along which input k varies."""
    if indexing == "xy" and n > 1 and k < 2:
        return 1 - k
    return k


class Meshgrid(Function):
    @staticmethod
    def forward(ctx, *xs, indexing):
        xp = backend.get_array_module(*xs)
        ctx.n, ctx.indexing = len(xs), indexing
        return tuple(xp.meshgrid(*xs, indexing=indexing))

    @staticmethod
    def backward(ctx, *gys):
        grads = []
        for k, g in enumerate(gys):
            axis = _axis_of(k, ctx.n, ctx.indexing)
            grads.append(g.sum(axis=tuple(a for a in range(g.ndim) if a != axis)))
        return tuple(grads)


def meshgrid(*tensors: Tensor | Sequence[Tensor], indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of the 1-d `tensors` (0-d ones count as length 1), as
    `torch.meshgrid(*tensors, indexing="ij")`; `indexing="xy"` gives NumPy's (Cartesian) order.
    Also takes one list of tensors, as PyTorch does."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise OpError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise OpError("meshgrid: expects at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise OpError(f"meshgrid: expects tensors, got a {type(t).__name__}")
    shapes = [tuple(t.shape) for t in tensors]
    if any(len(s) > 1 for s in shapes):
        raise OpError(f"meshgrid: expects 0-d or 1-d tensors, got shapes {shapes}")
    if len({t.dtype for t in tensors}) > 1:
        raise OpError(
            f"meshgrid: expects tensors of one dtype, got {[str(t.dtype) for t in tensors]}"
        )
    vectors = [reshape(t, 1) if t.ndim == 0 else t for t in tensors]
    return tuple(Meshgrid.apply(*vectors, indexing=indexing))


def _weighted_grids(*xs: Tensor, indexing: str) -> Tensor:
    # The generic tests need one output: weight the grids differently so a swap would show.
    grids = meshgrid(*xs, indexing=indexing)
    return cat([reshape(g * (k + 1), -1) for k, g in enumerate(grids)])


def _sample(draw: Draw) -> Sample:
    xs = [floats(draw, (draw.integers(1, 4),)) for _ in range(draw.integers(1, 3))]
    return Sample(xs, {"indexing": draw.choice(["ij", "xy"])})


SPECS = [OpSpec("meshgrid", _weighted_grids, _sample, functions=(Meshgrid,))]
