"""softmax: normalised exponentials along one axis.

Forward   y_i = exp(x_i) / sum_j exp(x_j), finite for any finite x (logits of 1e4 included:
          exp(1e4) alone overflows).
Backward  gx = J^T gy, the vector-Jacobian product of the upstream gradient gy with the
          Jacobian J_ij = dy_i/dx_j, from gy and the saved y alone, never forming J.
          (The derivation sits with the code, in `softmax_backward`.)
Saved     y: the backward needs only the output, never x.

The primitives work on the last axis; other axes are moved there and back (views, no copies).
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["softmax"]


@registry.reference("softmax.forward")
def softmax_forward(x: np.ndarray) -> np.ndarray:
    ### BEGIN SOLUTION A2.1 forward
    # y_i = exp(x_i - m) / sum_j exp(x_j - m), m = max_j x_j: subtracting m changes nothing
    # mathematically and keeps every exponent <= 0, so exp cannot overflow.
    xp = backend.get_array_module(x)
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
    ### END SOLUTION


@registry.reference("softmax.backward")
def softmax_backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    ### BEGIN SOLUTION A2.1 backward
    # The Jacobian is dy_i/dx_j = y_i (delta_ij - y_j), so
    # gx_j = sum_i gy_i y_i (delta_ij - y_j), that is gx_i = y_i * (gy_i - sum_j gy_j y_j).
    return y * (gy - (gy * y).sum(axis=-1, keepdims=True))
    ### END SOLUTION


def check_axis(op: str, axis: int, ndim: int) -> int:
    if ndim == 0 or not -ndim <= axis < ndim:
        raise OpError(f"{op}: axis {axis} is out of range for a tensor of {ndim} dimensions")
    return axis % ndim


class Softmax(Function):
    @staticmethod
    def forward(ctx, x, *, axis):
        ctx.axis = axis
        xp = backend.get_array_module(x)
        y = xp.moveaxis(registry.call("softmax.forward", xp.moveaxis(x, axis, -1)), -1, axis)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        xp = backend.get_array_module(y)
        last = (xp.moveaxis(a, ctx.axis, -1) for a in (gy, y))
        return xp.moveaxis(registry.call("softmax.backward", *last), -1, ctx.axis)


@torch_names
def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x) normalised to sum to 1 along `axis`."""
    return Softmax.apply(x, axis=check_axis("softmax", axis, x.ndim))


def axis_sample(low: float = -3.0, high: float = 3.0):
    def sample(draw) -> Sample:
        shape = draw.shape(min_dims=1)
        x = floats(draw, shape, low, high)
        return Sample([x], {"axis": draw.integers(-len(shape), len(shape) - 1)})

    return sample


SPECS = [
    OpSpec(
        "softmax",
        softmax,
        axis_sample(),
        functions=(Softmax,),
        primitives=("softmax.forward", "softmax.backward"),
    )
]
