"""rsqrt: y = 1 / sqrt(x), the reciprocal square root (RMSNorm's and attention's scale).

Forward   y = x^(-1/2)
Backward  gx = -1/2 x^(-3/2) gy = -1/2 y^3 gy
Saved     y: the derivative is a power of the output, so no root is taken twice.

x = 0 gives inf and x < 0 gives nan, as in PyTorch (NumPy warns about both).
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["rsqrt"]


class Rsqrt(Function):
    @staticmethod
    def forward(ctx, x):
        y = 1.0 / backend.get_array_module(x).sqrt(x)
        ctx.save_for_backward(y)
        return y.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return -0.5 * gy * (y * y * y)


def rsqrt(x: Tensor) -> Tensor:
    """Elementwise `1 / sqrt(x)` (`torch.rsqrt`)."""
    return Rsqrt.apply(x)


SPECS = [OpSpec("rsqrt", rsqrt, unary_sample(0.2, 3.0), functions=(Rsqrt,))]
