"""roll: shift elements cyclically along axes, as `torch.roll` (elements pushed off one end come
back at the other).

Forward   y[(i + s) mod n] = x[i]  along each axis in `dims`, by its shift s. With dims=None the
          tensor is flattened, rolled, and given its shape back.
Backward  gx = roll(gy, -shifts, dims): a roll only moves elements, so its gradient moves them
          back.
Saved     the shifts and dims (one int shift when dims is None).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import Draw, OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["roll"]


class Roll(Function):
    @staticmethod
    def forward(ctx, x, *, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return backend.get_array_module(x).roll(x, shifts, axis=dims)

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        if ctx.dims is None:
            return xp.roll(gy, -ctx.shifts, axis=None)
        return xp.roll(gy, tuple(-s for s in ctx.shifts), axis=ctx.dims)


def _ints(value: Any, what: str) -> tuple[int, ...]:
    values = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not all(isinstance(v, (int, np.integer)) for v in values):
        raise OpError(f"roll: {what} must be ints or a tuple of ints, got {value!r}")
    return tuple(int(v) for v in values)


def roll(
    x: Tensor, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None
) -> Tensor:
    """`x` shifted cyclically by `shifts` along `dims` (ints or tuples of equal length); with
    `dims=None`, along the flattened tensor (`torch.roll`)."""
    shifts = _ints(shifts, "shifts")
    if dims is None:
        if len(shifts) != 1:
            raise OpError(
                f"roll: without dims, shifts must be a single int (the flattened tensor has one "
                f"axis), got shifts={shifts}"
            )
        return Roll.apply(x, shifts=shifts[0], dims=None)
    dims = _ints(dims, "dims")
    if len(shifts) != len(dims):
        raise OpError(
            f"roll: shifts {shifts} and dims {dims} must have the same length (one shift per dim)"
        )
    for d in dims:
        if not -x.ndim <= d < x.ndim:
            raise OpError(f"roll: dim {d} is out of range for a tensor of shape {x.shape}")
    return Roll.apply(x, shifts=shifts, dims=tuple(d % x.ndim for d in dims))


def _sample(draw: Draw) -> Sample:
    shape = draw.shape(min_dims=1)
    ndim = len(shape)
    form = draw.choice(["flat", "int", "tuple"])
    if form == "flat":
        return Sample([floats(draw, shape)], {"shifts": draw.integers(-7, 7)})
    if form == "int":
        dims = draw.integers(-ndim, ndim - 1)
        return Sample([floats(draw, shape)], {"shifts": draw.integers(-7, 7), "dims": dims})
    dims = tuple(range(ndim))[:: draw.choice([1, -1])]
    shifts = tuple(draw.integers(-5, 5) for _ in dims)
    return Sample([floats(draw, shape)], {"shifts": shifts, "dims": dims})


SPECS = [OpSpec("roll", roll, _sample, functions=(Roll,))]
