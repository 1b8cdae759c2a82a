"""logsumexp: log(sum(exp(x))) over `axis`, computed without overflow.

Forward   m = max(x),  y = m + log(sum exp(x - m))       (exp never sees a positive argument)
          A slice that is all -inf gives -inf.
Backward  gx = gy * exp(x - y) = gy * softmax(x)
Saved     x and y (reduced axes kept): exp(x - y) is recomputed rather than stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.opspec import OpSpec, floats, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["logsumexp"]


def _logsumexp(x: np.ndarray, axis: tuple[int, ...]) -> np.ndarray:
    xp = backend.get_array_module(x)
    m = x.max(axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros((), x.dtype))  # all -inf: keep exp(x - m) = 0
    # log(0) = -inf is the right answer there. NumPy's errstate silences NumPy's warning; CuPy
    # has no errstate and never warns.
    with np.errstate(divide="ignore"):
        return m + xp.log(xp.exp(x - m).sum(axis=axis, keepdims=True))


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        y = _logsumexp(x, axis)
        ctx.axes, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(x, y)
        return y if keepdims else y.squeeze(axis)

    @staticmethod
    def backward(ctx, gy):
        x, y = ctx.saved_tensors
        xp = backend.get_array_module(x)
        g = expand_reduced(gy, x.shape, ctx.axes, ctx.keepdims)
        return g * xp.exp(x - y)


@torch_names
def logsumexp(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """`log(sum(exp(x)))` over `axis`, stable for large inputs."""
    return LogSumExp.apply(x, axis=normalize_axes(axis, x.ndim, "logsumexp"), keepdims=keepdims)


SPECS = [
    OpSpec("logsumexp", logsumexp, reduction_sample(lambda d, s: floats(d, s, -5, 5)), (LogSumExp,))
]
