"""silu (also called swish): x times its own sigmoid. The activation of the SwiGLU MLPs in
LLaMA-style transformers, silu(x W1) * (x W3), and of many convolutional networks.

Forward   s = sigmoid(x) = 1 / (1 + e^-x),   y = x s
Backward  dy/dx = s + x s (1 - s) = s (1 + x (1 - s)),   so   gx = gy s (1 + x (1 - s))
          (ds/dx = s (1 - s), as for sigmoid). Unlike relu it is smooth at 0, where it is
          x/2 + O(x^2), and slightly negative for x < 0 (its minimum is about -0.28 at x ~ -1.28).
Saved     x and s: the derivative needs both, and keeping s spares an exp per element.
"""

from __future__ import annotations

from tinyformer.autograd import Function
from tinyformer.ops.sigmoid import stable_sigmoid
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["silu"]


class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        s = stable_sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, gy):
        x, s = ctx.saved_tensors
        return gy * s * (1 + x * (1 - s))


def silu(x: Tensor) -> Tensor:
    """Elementwise x * sigmoid(x)."""
    return SiLU.apply(x)


SPECS = [OpSpec("silu", silu, unary_sample(-4.0, 4.0), functions=(SiLU,))]
