"""remainder: y = x1 mod x2 with the sign of x2 (Python's `%`, `torch.remainder`, `x1 % x2`),
with NumPy broadcasting.

Forward   y = x1 - floor(x1 / x2) x2            (0 <= y < x2 for x2 > 0; x2 < y <= 0 for x2 < 0)
Backward  between the jumps (where x1 / x2 is an integer) floor(x1 / x2) is constant, so
              gx1 = unbroadcast(gy, shape(x1)),
              gx2 = unbroadcast(-gy floor(x1 / x2), shape(x2)),
          PyTorch's rule; at a jump the derivative does not exist and this one is used.
Saved     x1 and x2, for the quotient in gx2.

Dtypes    as PyTorch: integers stay integers (an integer divisor of 0 is a ZeroDivisionError,
          where NumPy would give 0 with a warning); floats give nan for x2 = 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, data_of, unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcast_pair, floats
from tinyformer.tensor import Tensor

__all__ = ["remainder"]


class Remainder(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        xp = backend.get_array_module(x1, x2)
        ctx.save_for_backward(x1, x2)
        with np.errstate(divide="ignore", invalid="ignore"):  # x % 0 is nan, as PyTorch's
            return xp.remainder(x1, x2)

    @staticmethod
    def backward(ctx, gy):
        x1, x2 = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        gx2 = None
        if ctx.needs_input_grad[1]:
            with np.errstate(divide="ignore", invalid="ignore"):
                gx2 = unbroadcast(-gy * xp.floor_divide(x1, x2), x2.shape)
        return unbroadcast(gy, x1.shape), gx2


def remainder(x1: Any, x2: Any) -> Tensor:
    """Elementwise `x1 % x2`, the sign of x2's, as Python's `%` and `torch.remainder`."""
    a, b = binary_operands(x1, x2)
    if data_of(b).dtype.kind != "f" and bool((data_of(b) == 0).any()):
        raise ZeroDivisionError("remainder: integer division by zero")
    return Remainder.apply(a, b)


def _sample(draw) -> Sample:
    s1, s2 = broadcast_pair(draw)
    sign = draw.choice([1.0, -1.0])
    return Sample([floats(draw, s1, -3.0, 3.0), sign * floats(draw, s2, 0.5, 2.0)])


SPECS = [OpSpec("remainder", remainder, _sample, functions=(Remainder,))]
