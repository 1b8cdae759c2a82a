"""Gradient clipping by global norm."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["clip_grad_norm_"]


def clip_grad_norm_(parameters: Iterable[Any], max_norm: float, eps: float = 1e-6) -> float:
    """Scale all gradients together so that their joint L2 norm is at most `max_norm`.

    Returns the norm before clipping (worth logging: spikes warn of instability). As in PyTorch
    the scale is max_norm / (norm + eps), applied only when it is below 1.
    """
    if not max_norm >= 0:  # a negative one would flip every gradient: training would ascend
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    total = float(np.sqrt(sum(float(np.vdot(g, g)) for g in grads)))
    coef = max_norm / (total + eps)
    if coef < 1.0:
        for g in grads:
            g *= g.dtype.type(coef)
    return total
