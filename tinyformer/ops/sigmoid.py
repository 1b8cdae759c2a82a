"""sigmoid: the logistic function.

Forward   y = 1 / (1 + e^-x), computed as e^-|x| based forms so that no exp overflows:
          x >= 0: 1 / (1 + e^-x);   x < 0: e^x / (1 + e^x)
Backward  gx = gy * y * (1 - y)
Saved     y: the derivative only needs the output.
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["sigmoid"]


def stable_sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x) on an array, through e^-|x| so that no exp overflows (silu and
    binary_cross_entropy_with_logits use it too)."""
    xp = backend.get_array_module(x)
    z = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + z), z / (1 + z))


class Sigmoid(Function):
    @staticmethod
    def forward(ctx, x):
        y = stable_sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return gy * y * (1 - y)


def sigmoid(x: Tensor) -> Tensor:
    """Elementwise logistic sigmoid."""
    return Sigmoid.apply(x)


SPECS = [OpSpec("sigmoid", sigmoid, unary_sample(-4.0, 4.0), functions=(Sigmoid,))]
