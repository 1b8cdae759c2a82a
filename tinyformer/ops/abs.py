"""abs: absolute value.

Forward   y = |x|
Backward  gx = gy * sign(x); at x = 0 the gradient is 0 (sign(0) = 0), as in PyTorch.
Saved     x, for its sign.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["abs"]


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        xp = backend.get_array_module(x)
        ctx.save_for_backward(x)
        return xp.abs(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        xp = backend.get_array_module(x)
        return gy * xp.sign(x)


def abs(x: Tensor) -> Tensor:  # noqa: A001 (named as torch.abs)
    """Elementwise absolute value."""
    return Abs.apply(x)


SPECS = [OpSpec("abs", abs, unary_sample(avoid=(0.0,)), functions=(Abs,))]
