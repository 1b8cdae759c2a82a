"""relu: rectified linear unit.

Forward   y = max(x, 0)
Backward  gx = gy where x > 0, else 0 (the gradient at exactly 0 is 0, as in PyTorch)
Saved     the boolean mask x > 0.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["relu"]


class ReLU(Function):
    @staticmethod
    def forward(ctx, x):
        xp = backend.get_array_module(x)
        positive = x > 0
        ctx.save_for_backward(positive)
        # np.maximum, not np.where(positive, x, 0): NumPy's where branches on every element,
        # and a sign pattern is a coin flip to the branch predictor (4 ns an element against
        # 0.4 at (64, 32, 8, 8)). A NaN stays NaN, as in PyTorch.
        return xp.maximum(x, xp.zeros((), x.dtype))

    @staticmethod
    def backward(ctx, gy):
        (positive,) = ctx.saved_tensors
        return gy * positive


def relu(x: Tensor) -> Tensor:
    """Elementwise `max(x, 0)`."""
    return ReLU.apply(x)


SPECS = [OpSpec("relu", relu, unary_sample(avoid=(0.0,)), functions=(ReLU,))]
