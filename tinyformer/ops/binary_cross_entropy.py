"""binary_cross_entropy: the cross-entropy of yes/no targets under probabilities (a sigmoid's
output, as a GAN discriminator's). From logits, `binary_cross_entropy_with_logits` is the
stabler form of the same loss.

Forward   l = -w [t log p + (1 - t) log(1 - p)]   each log clamped at -100, as in PyTorch, so
          p = 0 or 1 gives a large finite loss rather than inf; then reduction "mean" (over all
          elements), "sum" or "none". Targets may be soft labels in [0, 1].
Backward  gp = g w (p - t) / max(p (1 - p), 1e-12)   (PyTorch's form: the same bound)
          gt = -g w (log p - log(1 - p))            (with the clamped logs: the forward's
                                                     exact derivative in t)
Saved     p and t (the weights are data).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.ops.binary_cross_entropy_with_logits import _factor
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["binary_cross_entropy"]

_OP = "binary_cross_entropy"


def _logs(p):
    """log p and log(1 - p), each clamped at -100."""
    xp = backend.get_array_module(p)
    floor = p.dtype.type(-100)
    with np.errstate(divide="ignore"):  # log(0) = -inf, then clamped (CuPy does not warn)
        return xp.maximum(xp.log(p), floor), xp.maximum(xp.log1p(-p), floor)


class BinaryCrossEntropy(Function):
    @staticmethod
    def forward(ctx, p, t, *, weight, reduction):
        log_p, log_q = _logs(p)
        loss = -(t * log_p + (1 - t) * log_q)
        if weight is not None:
            loss = loss * weight
        ctx.save_for_backward(p, t)
        ctx.weight, ctx.reduction = weight, reduction
        if reduction == "none":
            return loss
        total = loss.sum()
        return total / loss.size if reduction == "mean" else total

    @staticmethod
    def backward(ctx, g):
        p, t = ctx.saved_tensors
        xp = backend.get_array_module(p)
        if ctx.reduction == "mean":
            g = g / p.size
        if ctx.weight is not None:
            g = g * ctx.weight
        gp = g * (p - t) / xp.maximum(p * (1 - p), p.dtype.type(1e-12))
        gt = None
        if ctx.needs_input_grad[1]:
            log_p, log_q = _logs(p)
            gt = -g * (log_p - log_q)
        return gp, gt


def binary_cross_entropy(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    weight: Any = None,
    *,
    reduction: str = "mean",
) -> Tensor:
    """Binary cross-entropy of `target` (0 and 1, or soft labels) under the probabilities
    `input`, which must lie in [0, 1] (checked for arrays on the host; on a GPU the check would
    wait for the device). `weight` scales each element's loss."""
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"{_OP}: reduction must be mean, sum or none, got {reduction!r}")
    p = input.data
    if isinstance(p, np.ndarray) and p.size and not ((p >= 0).all() and (p <= 1).all()):
        raise OpError(
            f"{_OP}: input must be probabilities in [0, 1] (a sigmoid's output), got values from "
            f"{float(p.min()):.4g} to {float(p.max()):.4g}; for scores use "
            "binary_cross_entropy_with_logits"
        )
    return BinaryCrossEntropy.apply(
        input,
        same_shape_target(_OP, input, target),
        weight=_factor("weight", weight, input, _OP),
        reduction=reduction,
    )


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    kwargs = {
        "weight": floats(draw, shape, 0.5, 2.0) if draw.integers(0, 1) else None,
        "reduction": draw.choice(["mean", "sum", "none"]),
    }  # weights in kwargs: data, not differentiable inputs
    return Sample([floats(draw, shape, 0.05, 0.95), floats(draw, shape, 0.0, 1.0)], kwargs)


SPECS = [OpSpec(_OP, binary_cross_entropy, _sample, functions=(BinaryCrossEntropy,))]
