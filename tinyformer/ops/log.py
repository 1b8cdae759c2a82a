"""log: natural logarithm.

Forward   y = log(x)
Backward  gx = gy / x
Saved     x.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["log"]


class Log(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        xp = backend.get_array_module(x)
        return xp.log(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy / x


def log(x: Tensor) -> Tensor:
    """Elementwise natural logarithm."""
    return Log.apply(x)


SPECS = [OpSpec("log", log, unary_sample(0.2, 3.0), functions=(Log,))]
