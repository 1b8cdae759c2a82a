"""Gradient clipping by global norm.

`clip_grad_norm_` hands all the gradients to one primitive, "clip_grad_norm.many": its NumPy
reference is here; on a GPU a kernel does the whole clipping in two launches
(`kernels/cuda/clip.cu`) instead of a few per gradient.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from tinyformer import backend, registry
from tinyformer.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


@registry.reference("clip_grad_norm.many")
def clip_grad_norm_many(grads: Sequence[Any], *, max_norm: float, eps: float) -> Any:
    """Scale `grads` in place by min(max_norm / (norm + eps), 1); return the norm (0-d float64)."""
    xp = backend.get_array_module(grads[0])
    # Summed in float64, in order, as a Python loop would sum them (`cumsum` adds in order;
    # `sum` adds pairwise). The scale is clamped to 1 on the device rather than compared on the
    # host: deciding there would read the norm back (a sync on a GPU) in every step. A scale of
    # exactly 1 leaves the gradients' bits unchanged.
    squares = xp.stack([xp.vdot(g, g) for g in grads]).astype(xp.float64)
    total = xp.sqrt(xp.cumsum(squares)[-1])
    coef = xp.minimum(max_norm / (total + eps), 1.0)
    scale = {dtype: coef.astype(dtype) for dtype in {g.dtype for g in grads}}
    for g in grads:
        g *= scale[g.dtype]
    return total


def clip_grad_norm_(parameters: Iterable[Any], max_norm: float, eps: float = 1e-6) -> Tensor:
    """Scale all gradients together so that their joint L2 norm is at most `max_norm`.

    Returns the norm before clipping as a 0-d float64 Tensor on the gradients' device, as
    PyTorch returns one (worth logging: spikes warn of instability; `float(norm)` reads it). As
    in PyTorch the scale is max_norm / (norm + eps), applied only when it is below 1.
    """
    if not max_norm >= 0:  # a negative one would flip every gradient: training would ascend
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return Tensor(np.zeros((), np.float64))
    return Tensor(registry.call("clip_grad_norm.many", grads, max_norm=max_norm, eps=eps))


def clip_grad_value_(parameters: Iterable[Any], clip_value: float) -> None:
    """Clamp every gradient into [-clip_value, clip_value], in place, as PyTorch's."""
    if not clip_value >= 0:  # NaN too
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    for p in parameters:
        if p.grad is not None:
            xp = backend.get_array_module(p.grad)
            xp.clip(p.grad, -clip_value, clip_value, out=p.grad)
