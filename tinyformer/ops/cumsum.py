"""cumsum: running sums along an axis (`torch.cumsum`, `numpy.cumsum`).

Forward   y_i = x_0 + x_1 + ... + x_i   along `axis`.
Backward  x_j appears in every y_i with i >= j, each with weight 1, so
              gx_j = gy_j + gy_{j+1} + ... + gy_{n-1},
          the running sum taken from the other end: flip, cumsum, flip back.
Saved     nothing (the backward needs only gy and the axis).

Used in sampling, for instance: top-p keeps the most likely tokens whose probabilities,
sorted, have a cumulative sum below p.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["cumsum"]


class CumSum(Function):
    @staticmethod
    def forward(ctx, x, *, axis):
        xp = backend.get_array_module(x)
        ctx.axis = axis
        return xp.cumsum(x, axis=axis, dtype=x.dtype)

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        reverse = xp.flip(gy, ctx.axis)
        return xp.flip(xp.cumsum(reverse, axis=ctx.axis, dtype=gy.dtype), ctx.axis)


@torch_names
def cumsum(x: Tensor, axis: int) -> Tensor:
    """Running sums along `axis` (`torch.cumsum(x, dim)`); the axis is required, as in PyTorch."""
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise OpError(f"cumsum: axis {axis} is out of range for a tensor of shape {x.shape}")
    if x.ndim == 0:  # PyTorch: a 0-d tensor's running sum is itself
        return CumSum.apply(x.reshape(1), axis=0).reshape(())
    return CumSum.apply(x, axis=axis % x.ndim)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0, max_dims=3)
    axis = draw.integers(-max(len(shape), 1), max(len(shape) - 1, 0))
    return Sample([floats(draw, shape)], {"axis": axis})


SPECS = [OpSpec("cumsum", cumsum, _sample, functions=(CumSum,))]
