"""neg: y = -x.

Forward   y = -x
Backward  gx = -gy
Saved     nothing.
"""

from __future__ import annotations

from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["neg"]


class Neg(Function):
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, gy):
        return -gy


def neg(x: Tensor) -> Tensor:
    """Elementwise `-x`."""
    return Neg.apply(x)


SPECS = [OpSpec("neg", neg, unary_sample(), functions=(Neg,))]
