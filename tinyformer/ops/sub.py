"""sub: y = x1 - x2, with NumPy broadcasting.

Forward   y = x1 - x2
Backward  gx1 = unbroadcast(gy, shape(x1)),  gx2 = -unbroadcast(gy, shape(x2))
Saved     only the two input shapes.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.opspec import OpSpec, binary_sample
from tinyformer.tensor import Tensor

__all__ = ["sub"]


class Sub(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        ctx.shapes = (x1.shape, x2.shape)
        return x1 - x2

    @staticmethod
    def backward(ctx, gy):
        s1, s2 = ctx.shapes
        return unbroadcast(gy, s1), -unbroadcast(gy, s2)


def sub(x1: Any, x2: Any) -> Tensor:
    """Elementwise `x1 - x2`."""
    return Sub.apply(*binary_operands(x1, x2))


SPECS = [OpSpec("sub", sub, binary_sample(), functions=(Sub,))]
