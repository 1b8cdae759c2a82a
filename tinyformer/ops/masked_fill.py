"""masked_fill: replace the elements where `mask` is true by a constant.

Forward   y = mask ? value : x           (mask broadcasts to x's shape)
Backward  gx = mask ? 0 : gy             (a constant has no gradient back to x)
Saved     the mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, broadcastable, floats
from tinyformer.tensor import Tensor

__all__ = ["masked_fill"]


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, x, mask, *, value):
        xp = backend.get_array_module(x)
        ctx.save_for_backward(mask)
        return xp.where(mask, xp.asarray(value, x.dtype), x)

    @staticmethod
    def backward(ctx, gy):
        (mask,) = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        return xp.where(mask, xp.zeros((), gy.dtype), gy), None


def masked_fill(x: Tensor, mask: Any, value: float) -> Tensor:
    """`value` where `mask` is true, `x` elsewhere; `mask` is boolean and broadcasts to x."""
    if not isinstance(mask, Tensor):  # data from the user: onto x's device (a Tensor mask
        mask = backend.to_device(mask, x.device)  # must be there already: apply checks)
    if mask.dtype != np.bool_:
        raise OpError(f"masked_fill: mask must be boolean, got {mask.dtype}")
    try:
        fits = np.broadcast_shapes(mask.shape, x.shape) == x.shape
    except ValueError:
        fits = False
    if not fits:
        raise OpError(f"masked_fill: mask of shape {mask.shape} does not broadcast to {x.shape}")
    return MaskedFill.apply(x, mask, value=value)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    mask = np.asarray(draw.rng.random(broadcastable(draw, shape)) < 0.5)
    return Sample([floats(draw, shape), mask], {"value": draw.choice([0.0, -1e4, 2.5])})


SPECS = [OpSpec("masked_fill", masked_fill, _sample, functions=(MaskedFill,))]
