"""cos: y = cos(x).

Forward   y = cos(x)
Backward  gx = -gy * sin(x)
Saved     x: sin(x) is recomputed from it in backward.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["cos"]


class Cos(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.get_array_module(x).cos(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return -gy * backend.get_array_module(x).sin(x)


def cos(x: Tensor) -> Tensor:
    """Elementwise cosine (radians)."""
    return Cos.apply(x)


SPECS = [OpSpec("cos", cos, unary_sample(-4.0, 4.0), functions=(Cos,))]
