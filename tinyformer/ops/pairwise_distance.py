"""pairwise_distance: the p-norm distance between matching rows of two batches, as PyTorch's.

Shapes    x1 (..., D), x2 broadcasting against x1 -> y (...) (or (..., 1) with keepdims)
Forward   y = || x1 - x2 + eps ||_p over the last axis (PyTorch adds eps to the difference, so
          that equal rows keep a nonzero distance and a finite gradient)
Backward  through the ops it is made of (sub, add, norm): for p = 2,
          gx1 = gy (x1 - x2 + eps) / y, gx2 = -gx1 (summed over broadcast axes).
Saved     what those ops save.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer.autograd import OpError
from tinyformer.ops._util import binary_operands
from tinyformer.ops.norm import Norm, norm
from tinyformer.opspec import Draw, OpSpec, Sample, broadcast_pair
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["pairwise_distance"]


def broadcast_shape(op: str, **shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape the named inputs broadcast to, or an OpError naming them and their shapes."""
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        named = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise OpError(f"{op}: the shapes of {named} do not broadcast together") from None


@torch_names
def pairwise_distance(
    x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdims: bool = False
) -> Tensor:
    """`||x1 - x2 + eps||_p` over the last axis (PyTorch's `keepdim` is `keepdims`). `p` is a
    number >= 1 or `math.inf`."""
    op = "pairwise_distance"
    x1, x2 = binary_operands(x1, x2)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p >= 1:
        raise OpError(f"{op}: p must be a number >= 1 or math.inf, got {p!r}")
    if min(x1.ndim, x2.ndim) < 1:
        raise OpError(f"{op}: x1 {x1.shape} and x2 {x2.shape} both need a last axis of features")
    broadcast_shape(op, x1=x1.shape, x2=x2.shape)
    return norm(x1 - x2 + eps, p, axis=-1, keepdims=keepdims)


def _sample(draw: Draw) -> Sample:
    s1, s2 = broadcast_pair(draw)  # one of them is the shape they broadcast to
    s1, s2 = (*s1, 3), (*s2, 3)  # a feature axis of their own
    full = np.broadcast_shapes(s1, s2)
    # differences of distinct magnitudes away from 0: no kink for p = 1 (at 0) nor for
    # p = inf (at ties of |x1 - x2|)
    n = math.prod(full)
    gap = (0.2 + draw.rng.permutation(n) * (1.5 / n)) * draw.rng.choice([-1.0, 1.0], size=n)
    gap = gap.reshape(full)
    if s1 == full:
        x2 = draw.rng.uniform(-2.0, 2.0, size=s2)
        x1 = x2 + gap
    else:
        x1 = draw.rng.uniform(-2.0, 2.0, size=s1)
        x2 = x1 - gap
    p = draw.choice([2.0, 1.0, 3.0, math.inf])
    return Sample([x1, x2], {"p": p, "keepdims": bool(draw.integers(0, 1))})


SPECS = [OpSpec("pairwise_distance", pairwise_distance, _sample, functions=(Norm,))]
