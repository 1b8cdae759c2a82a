"""log_softmax: logarithm of softmax along one axis, computed without forming softmax.

Forward   y_i = log(exp(x_i) / sum_j exp(x_j)) = x_i - log sum_j exp(x_j), finite for logits
          like +-1e4, where log(softmax(x)) would give log(0) = -inf.
Backward  gx = J^T gy, from gy and the saved y alone (the derivation sits with the code, in
          `log_softmax_backward`).
Saved     y.
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function
from tinyformer.ops.softmax import axis_sample, check_axis
from tinyformer.opspec import OpSpec
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["log_softmax"]


@registry.reference("log_softmax.forward")
def log_softmax_forward(x: np.ndarray) -> np.ndarray:
    ### BEGIN SOLUTION A2.2 forward
    # y_i = (x_i - m) - log sum_j exp(x_j - m), m = max_j x_j: every exponent is <= 0 and the
    # sum is >= 1 (the max's own term), so neither exp nor log can overflow or meet log(0).
    xp = backend.get_array_module(x)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))
    ### END SOLUTION


@registry.reference("log_softmax.backward")
def log_softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    ### BEGIN SOLUTION A2.2 backward
    # dy_i/dx_j = delta_ij - softmax(x)_j, and softmax(x) = exp(y), so
    # gx_i = gy_i - exp(y_i) * sum_j gy_j.
    xp = backend.get_array_module(y)
    return gy - xp.exp(y) * gy.sum(axis=-1, keepdims=True)
    ### END SOLUTION


class LogSoftmax(Function):
    @staticmethod
    def forward(ctx, x, *, axis):
        ctx.axis = axis
        xp = backend.get_array_module(x)
        y = xp.moveaxis(registry.call("log_softmax.forward", xp.moveaxis(x, axis, -1)), -1, axis)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        xp = backend.get_array_module(y)
        last = (xp.moveaxis(a, ctx.axis, -1) for a in (gy, y))
        return xp.moveaxis(registry.call("log_softmax.backward", *last), -1, ctx.axis)


@torch_names
def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """log(softmax(x)) along `axis`, computed stably."""
    return LogSoftmax.apply(x, axis=check_axis("log_softmax", axis, x.ndim))


SPECS = [
    OpSpec(
        "log_softmax",
        log_softmax,
        axis_sample(),
        functions=(LogSoftmax,),
        primitives=("log_softmax.forward", "log_softmax.backward"),
    )
]
