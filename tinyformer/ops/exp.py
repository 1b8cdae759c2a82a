"""exp: y = e^x.

Forward   y = exp(x)
Backward  gx = gy * y          (d e^x / dx = e^x)
Saved     y: the derivative is the output itself, so nothing is recomputed.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["exp"]


class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        xp = backend.get_array_module(x)
        y = xp.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy * y


def exp(x: Tensor) -> Tensor:
    """Elementwise `e ** x`."""
    return Exp.apply(x)


SPECS = [OpSpec("exp", exp, unary_sample(), functions=(Exp,))]
