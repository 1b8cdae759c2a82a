"""where: y = x1 where cond is true, x2 elsewhere (cond, x1, x2 broadcast together).

Forward   y = cond ? x1 : x2
Backward  gx1 = unbroadcast(cond ? gy : 0, shape(x1)),  gx2 = unbroadcast(cond ? 0 : gy, shape(x2));
          cond is a boolean mask and gets no gradient.
Saved     cond (the routing), and the input shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, data_of, unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcast_pair, broadcastable, floats
from tinyformer.tensor import Tensor

__all__ = ["where"]


class Where(Function):
    @staticmethod
    def forward(ctx, cond, x1, x2):
        ctx.shapes = (x1.shape, x2.shape)
        xp = backend.get_array_module(cond, x1, x2)
        ctx.save_for_backward(cond)
        return xp.where(cond, x1, x2)

    @staticmethod
    def backward(ctx, gy):
        (cond,) = ctx.saved_tensors
        s1, s2 = ctx.shapes
        xp = backend.get_array_module(gy)
        zero = xp.zeros((), gy.dtype)
        gx1 = unbroadcast(xp.where(cond, gy, zero), s1)
        gx2 = unbroadcast(xp.where(cond, zero, gy), s2)
        return None, gx1, gx2


def where(cond: Any, x1: Any, x2: Any) -> Tensor:
    """`x1` where `cond` is true, else `x2`."""
    x1, x2 = binary_operands(x1, x2)
    if not isinstance(cond, Tensor):  # data from the user: onto the operands' device (a Tensor
        cond = backend.to_device(cond, backend.device_of(data_of(x1)))  # must be there already)
    if cond.dtype != np.bool_:
        raise TypeError(f"where: cond must be boolean, got {cond.dtype}")
    return Where.apply(cond, x1, x2)


def _sample(draw) -> Sample:
    s1, s2 = broadcast_pair(draw)
    cond_shape = broadcastable(draw, np.broadcast_shapes(s1, s2))
    cond = np.asarray(draw.rng.random(cond_shape) < 0.5)
    return Sample([cond, floats(draw, s1), floats(draw, s2)])


SPECS = [OpSpec("where", where, _sample, functions=(Where,))]
