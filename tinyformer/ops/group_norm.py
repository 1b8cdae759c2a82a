"""group_norm: normalise each example's channels in groups (diffusion U-Nets, small batches).

Forward   x (N, C, *) viewed as (N, G, C/G * prod(*)); per (example, group):
          xhat = (x - mean) / sqrt(var + eps)   (var with no correction, as PyTorch's)
          y = xhat * w[c] + b[c]                (w, b of shape (C,), optional)
          Unlike batch norm nothing depends on the other examples, so train and eval agree.
Backward  through the ops it is made of (reshape, mean, var, sub, rsqrt, mul, add).
Saved     what those ops save.
"""

from __future__ import annotations

import math
from typing import Any

from tinyformer.autograd import OpError
from tinyformer.ops.rsqrt import rsqrt
from tinyformer.opspec import Draw, OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["group_norm"]


def group_norm(
    x: Tensor, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Tensor:
    """Normalise `x` (N, C, ...) over each group of C / num_groups channels (and all positions)
    per example, then scale and shift each channel by `weight` and `bias` (C,)."""
    if x.ndim < 2:
        raise OpError(f"group_norm: x must be (N, C, ...), got shape {x.shape}")
    n, c = x.shape[:2]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise OpError(f"group_norm: num_groups must be an int >= 1, got {num_groups!r}")
    if c % num_groups:
        raise OpError(f"group_norm: {c} channels do not split into {num_groups} groups")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != (c,):
            raise OpError(f"group_norm: {name} must have shape ({c},), got {tuple(p.shape)}")
    per_group = c // num_groups * math.prod(x.shape[2:])
    g = x.reshape(n, num_groups, per_group)  # (N, G, C/G * positions)
    centred = g - g.mean(axis=2, keepdims=True)
    variance = centred.var(axis=2, keepdims=True, correction=0)
    y = (centred * rsqrt(variance + eps)).reshape(x.shape)
    per_channel = (1, c) + (1,) * (x.ndim - 2)  # broadcast over N and the positions
    if weight is not None:
        y = y * weight.reshape(per_channel)
    if bias is not None:
        y = y + bias.reshape(per_channel)
    return y


def _sample(draw: Draw) -> Sample:
    groups = draw.choice([1, 2, 3])
    positions = draw.shape(min_dims=1, max_dims=2, min_side=2)  # groups of 2 or more values
    shape = (draw.integers(1, 3), groups * draw.integers(1, 2), *positions)
    x = floats(draw, shape)
    affine = draw.integers(0, 1)
    tensors = [x] + ([floats(draw, shape[1:2]), floats(draw, shape[1:2])] if affine else [])
    if affine:
        return Sample(tensors, {"num_groups": groups, "eps": 1e-5})
    return Sample(tensors, {"num_groups": groups})


SPECS = [
    OpSpec(
        "group_norm",
        lambda x, *wb, num_groups, eps=1e-5: group_norm(x, num_groups, *wb, eps=eps),
        _sample,
    )
]
