"""batch_norm: normalise each channel over the batch (and every spatial position), then scale
and shift, as `torch.nn.functional.batch_norm`.

Shapes    x (N, C), (N, C, L) or (N, C, H, W); weight, bias, running_mean, running_var (C,).
          The primitives see x as (N, C, S), S the product of the spatial sizes; statistics
          are per channel, over the n = N S values of axes 0 and 2.
Forward   training:  mu = mean(x),  var = mean((x - mu)^2)   (biased, over the batch)
          eval:      mu, var = running_mean, running_var
          rstd = 1 / sqrt(var + eps),   xhat = (x - mu) rstd,   y = xhat w + b
Running   in training, when running stats are given, they move toward the batch's, in place:
          running_mean = (1 - m) running_mean + m mu
          running_var  = (1 - m) running_var  + m var n / (n - 1)   (the unbiased variance)
Backward  g = gy w;  gw = sum(gy xhat),  gb = sum(gy)   (sums over axes 0 and 2)
          training:  gx = rstd (g - mean(g) - xhat mean(g xhat))   (mu and var depend on x)
          eval:      gx = rstd g                                   (the statistics are data)
Saved     x, w, and per channel mu and rstd (two numbers a channel): xhat is recomputed.
"""

from __future__ import annotations

import math
from typing import Any

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import array_of
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["batch_norm"]


@registry.reference("batch_norm.forward")
def batch_norm_forward(x, w, b, mean, var, eps):
    """x (N, C, S); mean, var (C,) or None (use the batch's) -> y, mu (C,), var (C,), rstd (C,)."""
    xp = backend.get_array_module(x)
    if mean is None:
        mu = x.mean(axis=(0, 2))
        xc = x - mu[:, None]
        var = (xc * xc).mean(axis=(0, 2))
    else:
        # copies: mu is saved for backward, and a later training step updates the running
        # statistics in place
        mu, var = xp.array(mean, dtype=x.dtype), xp.array(var, dtype=x.dtype)
        xc = x - mu[:, None]
    rstd = 1.0 / xp.sqrt(var + eps)
    y = xc * rstd[:, None]
    if w is not None:
        y = y * w[:, None]
    if b is not None:
        y = y + b[:, None]
    return y.astype(x.dtype, copy=False), mu, var, rstd.astype(x.dtype, copy=False)


@registry.reference("batch_norm.backward")
def batch_norm_backward(gy, x, w, mu, rstd, training):
    """gy, x (N, C, S) -> gx (N, C, S), gw (C,), gb (C,)."""
    xhat = (x - mu[:, None]) * rstd[:, None]
    g = gy * w[:, None] if w is not None else gy
    if training:  # the right side reads the old g throughout
        g = (
            g
            - g.mean(axis=(0, 2), keepdims=True)
            - xhat * (g * xhat).mean(axis=(0, 2), keepdims=True)
        )
    gx = g * rstd[:, None]
    return gx, (gy * xhat).sum(axis=(0, 2)), gy.sum(axis=(0, 2))


def _update(running: Any, batch: Any, momentum: float) -> None:
    """running <- (1 - m) running + m batch, in place (running may be on a device)."""
    running[...] = (1.0 - momentum) * running + momentum * batch.astype(running.dtype)


class BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, w, b, *, running_mean, running_var, training, momentum, eps):
        x3 = x.reshape(x.shape[0], x.shape[1], -1)  # (N, C, S)
        stats = (None, None) if training else (running_mean, running_var)
        y, mu, var, rstd = registry.call("batch_norm.forward", x3, w, b, *stats, eps)
        if training and running_mean is not None:
            n = x3.shape[0] * x3.shape[2]
            _update(running_mean, mu, momentum)
            _update(running_var, var * (n / (n - 1)), momentum)
        ctx.training = training
        ctx.save_for_backward(x3, w, mu, rstd)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x3, w, mu, rstd = ctx.saved_tensors
        gx, gw, gb = registry.call(
            "batch_norm.backward", gy.reshape(x3.shape), x3, w, mu, rstd, ctx.training
        )
        need_w, need_b = ctx.needs_input_grad[1:]
        return gx.reshape(gy.shape), (gw if need_w else None), (gb if need_b else None)


def _channel_array(name: str, value: Any, c: int) -> Any:
    if value is None:
        return None
    a = array_of(value)
    if tuple(a.shape) != (c,):
        raise OpError(f"batch_norm: {name} must have shape ({c},), got {tuple(a.shape)}")
    return a


def batch_norm(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    running_mean: Any,
    running_var: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Batch normalisation as `torch.nn.functional.batch_norm` (same arguments, same order):
    with `training`, the batch's statistics are used and the running ones (if given) updated
    in place; without, the running ones are used."""
    if input.ndim < 2:
        raise OpError(f"batch_norm: input must be (N, C, ...), got shape {input.shape}")
    c = input.shape[1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (c,):
            raise OpError(f"batch_norm: {name} must have shape ({c},), got {tuple(p.shape)}")
    mean = _channel_array("running_mean", running_mean, c)
    var = _channel_array("running_var", running_var, c)
    if (mean is None) != (var is None):
        raise OpError("batch_norm: give both running_mean and running_var, or neither")
    if not training and mean is None:
        raise OpError("batch_norm: running_mean and running_var are needed when not training")
    if training and math.prod(input.shape) // max(c, 1) <= 1:
        raise ValueError(
            f"batch_norm: expected more than 1 value per channel when training, got input size "
            f"{tuple(input.shape)}"
        )
    return BatchNorm.apply(
        input, weight, bias, running_mean=mean, running_var=var, training=bool(training),
        momentum=momentum, eps=eps,
    )  # fmt: skip


def _sample(draw) -> Sample:
    c = draw.integers(1, 3)
    spatial = draw.choice([(), (draw.integers(1, 3),), (draw.integers(1, 3), draw.integers(2, 3))])
    shape = (draw.integers(2, 4), c, *spatial)
    w = floats(draw, (c,), 0.5, 1.5) if draw.integers(0, 1) else None
    b = floats(draw, (c,)) if draw.integers(0, 1) else None
    training = bool(draw.integers(0, 1))
    stats = [floats(draw, (c,)), floats(draw, (c,), 0.5, 2.0)]
    if training and draw.integers(0, 1):
        stats = [None, None]  # a batch's statistics only, as with track_running_stats=False
    kwargs = {"running_mean": stats[0], "running_var": stats[1], "training": training}
    return Sample([floats(draw, shape), w, b], kwargs)


SPECS = [
    OpSpec(
        "batch_norm",
        lambda x, w, b, running_mean, running_var, training: batch_norm(
            x, running_mean, running_var, w, b, training
        ),
        _sample,
        functions=(BatchNorm,),
        primitives=("batch_norm.forward", "batch_norm.backward"),
    )
]
