"""mul: y = x1 * x2, with NumPy broadcasting.

Forward   y = x1 * x2
Backward  gx1 = unbroadcast(gy * x2, shape(x1)),  gx2 = unbroadcast(gy * x1, shape(x2))
Saved     x1 and x2: each one's gradient is scaled by the other.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.opspec import OpSpec, binary_sample
from tinyformer.tensor import Tensor

__all__ = ["mul"]


class Mul(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        ctx.save_for_backward(x1, x2)
        return x1 * x2

    @staticmethod
    def backward(ctx, gy):
        x1, x2 = ctx.saved_tensors
        need1, need2 = ctx.needs_input_grad
        gx1 = unbroadcast(gy * x2, x1.shape) if need1 else None
        gx2 = unbroadcast(gy * x1, x2.shape) if need2 else None
        return gx1, gx2


def mul(x1: Any, x2: Any) -> Tensor:
    """Elementwise `x1 * x2`."""
    return Mul.apply(*binary_operands(x1, x2))


SPECS = [OpSpec("mul", mul, binary_sample(), functions=(Mul,))]
