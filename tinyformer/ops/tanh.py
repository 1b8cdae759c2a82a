"""tanh: hyperbolic tangent.

Forward   y = tanh(x)
Backward  gx = gy * (1 - y^2)
Saved     y: the derivative only needs the output.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["tanh"]


class Tanh(Function):
    @staticmethod
    def forward(ctx, x):
        xp = backend.get_array_module(x)
        y = xp.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy * (1 - y * y)


def tanh(x: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent."""
    return Tanh.apply(x)


SPECS = [OpSpec("tanh", tanh, unary_sample(-3.0, 3.0), functions=(Tanh,))]
