"""var and std over `axis`, with Bessel's `correction` (1 by default, as in PyTorch).

Forward   m = mean(x),  y = sum (x_i - m)^2 / (n - correction)        std = sqrt(var)
Backward  gx = gy * 2 (x - m) / (n - correction)
          (the path through m vanishes: sum_i (x_i - m) = 0)
Saved     x - m, the centred input, which is all the gradient needs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.ops.sqrt import sqrt
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["std", "var"]


class Var(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims, correction):
        n = math.prod(x.shape[a] for a in axis)
        if n - correction <= 0:
            raise OpError(
                f"var: {n} elements per reduction with correction={correction} leave no degrees "
                f"of freedom (input shape {x.shape}, axis {axis})"
            )
        xc = x - x.mean(axis=axis, keepdims=True)
        ctx.axes, ctx.keepdims, ctx.dof = axis, keepdims, n - correction
        ctx.save_for_backward(xc)
        return (xc * xc).sum(axis=axis, keepdims=keepdims) / ctx.dof

    @staticmethod
    def backward(ctx, gy):
        (xc,) = ctx.saved_tensors
        g = expand_reduced(gy, xc.shape, ctx.axes, ctx.keepdims)
        return g * xc * (2.0 / ctx.dof)


@torch_names
def var(
    x: Tensor, axis: Any = None, keepdims: bool = False, *, correction: int = 1,
    unbiased: bool | None = None,
) -> Tensor:  # fmt: skip
    """Variance over `axis`, dividing by `n - correction`; PyTorch's older `unbiased=False` is
    `correction=0` (True: 1)."""
    correction = _correction("var", correction, unbiased)
    axes = normalize_axes(axis, x.ndim, "var")
    return Var.apply(x, axis=axes, keepdims=keepdims, correction=correction)


@torch_names
def std(
    x: Tensor, axis: Any = None, keepdims: bool = False, *, correction: int = 1,
    unbiased: bool | None = None,
) -> Tensor:  # fmt: skip
    """Standard deviation over `axis`, as `sqrt(var)`."""
    correction = _correction("std", correction, unbiased)
    return sqrt(var(x, axis, keepdims, correction=correction))


def _correction(op: str, correction: int, unbiased: bool | None) -> int:
    if unbiased is None:
        return correction
    if not isinstance(unbiased, (bool, np.bool_)):
        raise TypeError(f"{op}: unbiased must be a bool, got {unbiased!r}")
    if correction != 1:
        raise TypeError(f"{op}: got unbiased={unbiased} and correction={correction}; pass one")
    return int(unbiased)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, min_side=2)
    ndim = len(shape)
    axis = draw.choice([None, draw.integers(-ndim, ndim - 1)])
    kwargs = {
        "axis": axis,
        "keepdims": bool(draw.integers(0, 1)),
        "correction": draw.integers(0, 1),
    }
    return Sample([floats(draw, shape)], kwargs)


SPECS = [
    OpSpec("var", var, _sample, functions=(Var,)),
    OpSpec("std", std, _sample, functions=(Var,)),
]
