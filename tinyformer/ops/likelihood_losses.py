"""The negative log-likelihood losses of two distributions, as PyTorch's: a Gaussian with a
predicted variance (regression with uncertainty) and a Poisson (counts).

gaussian_nll_loss  l = (log(max(var, eps)) + (x - t)^2 / max(var, eps)) / 2
                   (+ log(2 pi) / 2 with full=True). var is clamped as PyTorch clamps it, in
                   no_grad: its gradient is taken at the clamped value and passes the clamp
                   unchanged (a straight-through clamp).
poisson_nll_loss   log_input=True:   l = e^x - t x         (x the log of the rate)
                   log_input=False:  l = x - t log(x + eps) (x the rate)
                   full=True adds Stirling's approximation of log(t!), t log t - t +
                   log(2 pi t) / 2, where t > 1 (0 elsewhere, as PyTorch).
Then reduction "mean", "sum" or "none", as the other losses.
Backward  through the ops they are made of.
Saved     what those ops save.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.ops.exp import exp
from tinyformer.ops.l1_loss import reduce_loss
from tinyformer.ops.log import log
from tinyformer.ops.margin_losses import REDUCTIONS, operand
from tinyformer.ops.pairwise_distance import broadcast_shape
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["gaussian_nll_loss", "poisson_nll_loss"]

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _variance(op: str, var: Any, input: Tensor) -> Tensor:  # noqa: A002
    """var as a Tensor that broadcasts against input, by PyTorch's rules: input's shape, that
    shape without its last axis (one variance per row), or input's shape with one axis of 1."""
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise OpError(f"{op}: var must be >= 0, got {var}")
        return Tensor(np.full(input.shape, var), dtype=input.dtype, device=input.device)
    var = operand(op, var, input)
    if bool((var.data < 0).any()):
        raise OpError(f"{op}: var has negative entries")
    if var.shape == input.shape:
        return var
    if var.shape == input.shape[:-1]:
        return var.unsqueeze(-1)  # one variance per row, shared by its last axis
    mismatched = [v for x, v in zip(input.shape, var.shape) if x != v]
    if var.ndim == input.ndim and mismatched == [1]:
        return var
    raise OpError(
        f"{op}: var {var.shape} must be input's shape {input.shape}, that shape without its "
        "last axis, or input's shape with one axis of size 1"
    )


def gaussian_nll_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    var: Any,
    full: bool = False,
    eps: float = 1e-6,
    reduction: str = "mean",
) -> Tensor:
    """The Gaussian negative log-likelihood of `target` under means `input` and variances
    `var` (a tensor as PyTorch's rules allow, or one number for all)."""
    op = "gaussian_nll_loss"
    if reduction not in REDUCTIONS:
        raise OpError(f"{op}: reduction must be mean, sum or none, got {reduction!r}")
    target = operand(op, target, input)
    if broadcast_shape(op, input=input.shape, target=target.shape) != input.shape:
        raise OpError(f"{op}: target {target.shape} must broadcast to input {input.shape}")
    var = _variance(op, var, input)
    xp = backend.get_array_module(var.data)
    clamped = Tensor(xp.maximum(var.data, var.dtype.type(eps)))
    if var.requires_grad:  # PyTorch clamps in no_grad: the gradient goes through unchanged
        clamped = clamped + (var - var.detach())
    d = input - target
    loss = (log(clamped) + d * d / clamped) * 0.5
    if full:
        loss = loss + HALF_LOG_2PI
    return reduce_loss(op, loss, reduction)


def poisson_nll_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    log_input: bool = True,
    full: bool = False,
    *,  # keywords only: PyTorch's next one is size_average, long deprecated
    eps: float = 1e-8,
    reduction: str = "mean",
) -> Tensor:
    """The Poisson negative log-likelihood of counts `target` under rates `exp(input)`
    (`log_input=True`) or `input`; shapes equal."""
    op = "poisson_nll_loss"
    t = same_shape_target(op, input, target)
    if log_input:
        loss = exp(input) - t * input
    else:
        loss = input - t * log(input + eps)
    if full:
        big = t.data > 1  # where Stirling's term counts; elsewhere 0 (and no log of 0)
        safe = where(big, t, 2.0)
        stirling = safe * log(safe) - safe + log(safe * (2 * math.pi)) * 0.5
        loss = loss + where(big, stirling, 0.0)
    return reduce_loss(op, loss, reduction)


def _gaussian_sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    form = draw.choice(["same", "row", "one axis", "number"])
    if form == "same":
        var = floats(draw, shape, 0.2, 2.0)
    elif form == "row":
        var = floats(draw, shape[:-1], 0.2, 2.0)
    elif form == "one axis":
        axis = draw.integers(0, len(shape) - 1)
        var = floats(draw, tuple(1 if a == axis else n for a, n in enumerate(shape)), 0.2, 2.0)
    else:
        var = draw.choice([0.5, 2.0])
    kwargs = {"full": bool(draw.integers(0, 1)), "reduction": draw.choice(REDUCTIONS)}
    # var stays above eps: where it is clamped, the gradient PyTorch gives (and this gives) is
    # not the derivative (the loss is flat there), so only the oracle tests check it
    return Sample([floats(draw, shape), floats(draw, shape), var], kwargs)


def _poisson_sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    log_input = bool(draw.integers(0, 1))
    x = floats(draw, shape) if log_input else floats(draw, shape, 0.2, 3.0)
    t = floats(draw, shape, 0.0, 4.0, avoid=(1.0,))  # off the jump of Stirling's term at 1
    kwargs = {"log_input": log_input, "full": bool(draw.integers(0, 1))}
    return Sample([np.asarray(x), np.asarray(t)], {**kwargs, "reduction": draw.choice(REDUCTIONS)})


SPECS = [
    OpSpec("gaussian_nll_loss", gaussian_nll_loss, _gaussian_sample),
    OpSpec("poisson_nll_loss", poisson_nll_loss, _poisson_sample),
]
