"""div: y = x1 / x2, with NumPy broadcasting.

Forward   y = x1 / x2
Backward  gx1 = unbroadcast(gy / x2, shape(x1))
          gx2 = unbroadcast(-gy * x1 / x2^2, shape(x2)) = unbroadcast(-gy * y / x2, shape(x2))
Saved     x2 and y: the second form of gx2 reuses the output instead of squaring x2.

Dtypes    true division, as PyTorch's: integer (or boolean) operands on both sides give float32,
          PyTorch's default float dtype (NumPy would give float64), so `i / 2` is float32.
          Integers beside floats take the float's dtype (`binary_operands`).
"""

from __future__ import annotations

from typing import Any

from tinyformer.array_facts import DEFAULT_DTYPE
from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, data_of, unbroadcast
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, binary_sample

__all__ = ["div"]


class Div(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        y = x1 / x2
        ctx.shape1 = x1.shape
        ctx.save_for_backward(x2, y)
        return y

    @staticmethod
    def backward(ctx, gy):
        x2, y = ctx.saved_tensors
        gx1 = gy / x2
        gx2 = unbroadcast(-gx1 * y, x2.shape) if ctx.needs_input_grad[1] else None
        return unbroadcast(gx1, ctx.shape1), gx2


def div(x1: Any, x2: Any) -> Tensor:
    """Elementwise `x1 / x2`: true division, float32 for integer operands (as PyTorch)."""
    a, b = binary_operands(x1, x2)
    if data_of(a).dtype.kind != "f":  # then b is not floating either
        a, b = (data_of(t).astype(DEFAULT_DTYPE) for t in (a, b))
    return Div.apply(a, b)


SPECS = [OpSpec("div", div, binary_sample(positive_second=True), functions=(Div,))]
