"""l1_loss: the mean absolute error between a prediction and a target of the same shape.

Forward   loss = sum |x - t| / N   (reduction "mean", N the element count; "sum" drops the / N,
          "none" returns |x - t| elementwise)
Backward  through the ops it is made of (sub, abs, mean or sum): gx = sign(x - t) g / N,
          gt = -gx; at x = t the gradient is 0, as abs's and PyTorch's.
Saved     what those ops save.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.autograd import OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.ops.abs import abs
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["l1_loss"]


def reduce_loss(op: str, loss: Tensor, reduction: str) -> Tensor:
    """An elementwise loss reduced as PyTorch's losses are: "mean", "sum" or "none"."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise OpError(f"{op}: reduction must be mean, sum or none, got {reduction!r}")


def l1_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:  # noqa: A002
    """Mean (or summed, or elementwise) absolute difference of `input` and `target`, whose
    shapes must be equal (a (N, 1) prediction against a (N,) target is refused, as in
    `mse_loss`)."""
    return reduce_loss(
        "l1_loss", abs(input - same_shape_target("l1_loss", input, target)), reduction
    )


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    t = floats(draw, shape)
    gap = floats(draw, shape, avoid=(0.0,))  # off abs's kink at x = t
    return Sample([np.asarray(t + gap), t], {"reduction": draw.choice(["mean", "sum", "none"])})


SPECS = [OpSpec("l1_loss", l1_loss, _sample)]
