"""Gradient clipping by global norm."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tinyformer import backend

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
    xp = backend.get_array_module(grads[0])
    # summed in float64, as Python floats summed them; on a device, one read back to the host
    total = float(xp.sqrt(sum(xp.vdot(g, g).astype(xp.float64) for g in grads)))
    coef = max_norm / (total + eps)
    if coef < 1.0:
        for g in grads:
            g *= g.dtype.type(coef)
    return total
