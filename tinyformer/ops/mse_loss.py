"""mse_loss: the mean squared error between a prediction and a target of the same shape.

Forward   d = x - t,   loss = sum(d^2) / N   (reduction "mean", N = d.size; "sum" drops the
          / N, "none" returns d^2 elementwise)
Backward  gx = 2 d g / N   (g: the incoming gradient, broadcast back for "none"),  gt = -gx
Saved     d: the gradient is linear in it, so x and t are not needed again.
"""

from __future__ import annotations

from typing import Any

from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["mse_loss"]


class MSELoss(Function):
    @staticmethod
    def forward(ctx, x, t, *, reduction):
        d = x - t
        ctx.save_for_backward(d)
        ctx.reduction = reduction
        if reduction == "none":
            return d * d
        total = (d * d).sum()
        return total / d.size if reduction == "mean" else total

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        gx = 2 * d * g
        if ctx.reduction == "mean":
            gx /= d.size
        return gx, -gx


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or summed, or elementwise) squared difference of `input` and `target`.

    The shapes must be equal. PyTorch broadcasts them with a warning, and a (N, 1) prediction
    against a (N,) target then averages N x N differences: a quiet, classic bug, refused here.
    """
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"mse_loss: reduction must be mean, sum or none, got {reduction!r}")
    t = same_shape_target("mse_loss", input, target)
    return MSELoss.apply(input, t, reduction=reduction)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    reduction = draw.choice(["mean", "sum", "none"])
    return Sample([floats(draw, shape), floats(draw, shape)], {"reduction": reduction})


SPECS = [OpSpec("mse_loss", mse_loss, _sample, functions=(MSELoss,))]
