"""sqrt: square root.

Forward   y = sqrt(x)
Backward  gx = gy / (2 y)      (d sqrt(x)/dx = 1 / (2 sqrt(x)))
Saved     y: the derivative only needs the output.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["sqrt"]


class Sqrt(Function):
    @staticmethod
    def forward(ctx, x):
        xp = backend.get_array_module(x)
        y = xp.sqrt(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy / (2 * y)


def sqrt(x: Tensor) -> Tensor:
    """Elementwise square root."""
    return Sqrt.apply(x)


SPECS = [OpSpec("sqrt", sqrt, unary_sample(0.2, 3.0), functions=(Sqrt,))]
