"""clone: a copy of x in new memory that autograd still connects to x.

Forward   y = x            (copied: writing into y.data leaves x alone)
Backward  gx = gy          (each element of y is its element of x)
Saved     nothing.

`x.detach().clone()` is PyTorch's idiom for a snapshot outside the graph; `x.clone()` alone
keeps the gradient path (a running copy inside a model, say).
"""

from __future__ import annotations

from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["clone"]


class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return x.copy()

    @staticmethod
    def backward(ctx, gy):
        return gy


def clone(x: Tensor) -> Tensor:
    """A copy of `x` with its own memory; gradients flow back to `x`."""
    return Clone.apply(x)


SPECS = [OpSpec("clone", clone, unary_sample(), functions=(Clone,))]
