"""smooth_l1_loss and huber_loss: squared error for small differences, absolute error for
large ones (robust regression; the DQN tutorial's loss).

Forward   d = x - t,  a = |d|
          smooth_l1:  l = d^2 / (2 beta)     where a < beta,  else a - beta / 2   (beta = 0: a)
          huber:      l = d^2 / 2            where a <= delta, else delta (a - delta / 2)
                      (= delta * smooth_l1 with beta = delta)
          then reduction "mean", "sum" or "none" as the other losses.
Backward  through the ops it is made of: gx = g d / beta inside, g sign(d) outside (huber:
          g d inside, g delta sign(d) outside); gt = -gx.
Saved     what those ops save.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.autograd import OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.ops.abs import abs
from tinyformer.ops.l1_loss import reduce_loss
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["huber_loss", "smooth_l1_loss"]


def _width(op: str, name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise OpError(f"{op}: {name} must be a number >= 0, got {value!r}")
    return float(value)


def smooth_l1_loss(
    input: Tensor,
    target: Any,
    reduction: str = "mean",
    beta: float = 1.0,  # noqa: A002
) -> Tensor:
    """Squared error below `beta`, absolute error above it, joined smoothly (PyTorch's)."""
    beta = _width("smooth_l1_loss", "beta", beta)
    d = input - same_shape_target("smooth_l1_loss", input, target)
    a = abs(d)
    loss = a if beta == 0 else where(a.data < beta, d * d * (0.5 / beta), a - 0.5 * beta)
    return reduce_loss("smooth_l1_loss", loss, reduction)


def huber_loss(
    input: Tensor,
    target: Any,
    reduction: str = "mean",
    delta: float = 1.0,  # noqa: A002
) -> Tensor:
    """Squared error up to `delta`, then delta times the absolute error (PyTorch's)."""
    delta = _width("huber_loss", "delta", delta)
    d = input - same_shape_target("huber_loss", input, target)
    a = abs(d)
    loss = where(a.data <= delta, d * d * 0.5, (a - 0.5 * delta) * delta)
    return reduce_loss("huber_loss", loss, reduction)


def _sample(draw, width: str):
    shape = draw.shape(min_dims=0)
    t = floats(draw, shape)
    w = draw.choice([1.0, 0.5, 2.0])
    gap = floats(draw, shape, -3.0, 3.0, avoid=(0.0, w, -w))  # off the kinks at 0 and +-w
    return Sample(
        [np.asarray(t + gap), t], {"reduction": draw.choice(["mean", "sum", "none"]), width: w}
    )


SPECS = [
    OpSpec("smooth_l1_loss", smooth_l1_loss, lambda draw: _sample(draw, "beta")),
    OpSpec("huber_loss", huber_loss, lambda draw: _sample(draw, "delta")),
]
