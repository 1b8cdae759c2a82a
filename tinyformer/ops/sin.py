"""sin: y = sin(x).

Forward   y = sin(x)
Backward  gx = gy * cos(x)
Saved     x: cos(x) is recomputed from it in backward.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["sin"]


class Sin(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.get_array_module(x).sin(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * backend.get_array_module(x).cos(x)


def sin(x: Tensor) -> Tensor:
    """Elementwise sine (radians)."""
    return Sin.apply(x)


SPECS = [OpSpec("sin", sin, unary_sample(-4.0, 4.0), functions=(Sin,))]
