"""add: y = x1 + x2, with NumPy broadcasting.

Forward   y = x1 + x2
Backward  gx1 = unbroadcast(gy, shape(x1)),  gx2 = unbroadcast(gy, shape(x2))
          (dy/dx1 = dy/dx2 = 1; `unbroadcast` sums over the axes broadcasting copied along)
Saved     only the two input shapes: the gradient of a sum does not depend on the values.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.opspec import OpSpec, binary_sample
from tinyformer.tensor import Tensor

__all__ = ["add"]


class Add(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        ctx.shapes = (x1.shape, x2.shape)
        return x1 + x2

    @staticmethod
    def backward(ctx, gy):
        s1, s2 = ctx.shapes
        return unbroadcast(gy, s1), unbroadcast(gy, s2)


def add(x1: Any, x2: Any) -> Tensor:
    """Elementwise `x1 + x2` (either may be a Python number)."""
    return Add.apply(*binary_operands(x1, x2))


SPECS = [OpSpec("add", add, binary_sample(), functions=(Add,))]
