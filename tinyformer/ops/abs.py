"""abs: absolute value.

Forward   y = |x|
Backward  gx = gy * sign(x); at x = 0 the gradient is 0 (sign(0) = 0), as in PyTorch.
Saved     x, for its sign.
"""

from __future__ import annotations

import numpy as np

from tinyformer.autograd import Function
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, unary_sample


class Abs(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.abs(x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * np.sign(x)


def abs(x: Tensor) -> Tensor:  # noqa: A001 (named as torch.abs)
    """Elementwise absolute value."""
    return Abs.apply(x)


SPECS = [OpSpec("abs", abs, unary_sample(avoid=(0.0,)), functions=(Abs,))]
