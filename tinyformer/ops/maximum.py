"""maximum and minimum: elementwise larger / smaller of two tensors, with broadcasting.

Forward   y = max(x1, x2)                      (minimum(x1, x2) = -maximum(-x1, -x2))
Backward  the gradient goes to whichever input is larger:
          gx1 = gy * [x1 > x2],  gx2 = gy * [x2 > x1];
          at ties, each gets half (gy / 2), the average of the two one-sided derivatives, as
          PyTorch does. Then `unbroadcast` to each input's shape.
Saved     x1 and x2, to know which was larger.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.ops.neg import neg
from tinyformer.opspec import OpSpec, Sample, broadcast_pair
from tinyformer.tensor import Tensor

__all__ = ["maximum", "minimum"]


class Maximum(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        xp = backend.get_array_module(x1, x2)
        ctx.save_for_backward(x1, x2)
        return xp.maximum(x1, x2)

    @staticmethod
    def backward(ctx, gy):
        x1, x2 = ctx.saved_tensors
        share1 = (x1 > x2) + 0.5 * (x1 == x2)
        gx1 = unbroadcast(gy * share1, x1.shape)
        gx2 = unbroadcast(gy * (1 - share1), x2.shape)
        return gx1.astype(gy.dtype, copy=False), gx2.astype(gy.dtype, copy=False)


def maximum(x1: Any, x2: Any) -> Tensor:
    """Elementwise larger of `x1` and `x2`."""
    return Maximum.apply(*binary_operands(x1, x2))


def minimum(x1: Any, x2: Any) -> Tensor:
    """Elementwise smaller of `x1` and `x2`, as `-maximum(-x1, -x2)`."""
    a, b = binary_operands(x1, x2)
    return neg(Maximum.apply(neg(a), neg(b)))


def _sample(draw) -> Sample:
    # x1 on a grid of step 0.2, x2 on the same grid shifted by 0.1: they never come within 0.1 of
    # each other, so finite differences never straddle the switch point.
    s1, s2 = broadcast_pair(draw)
    x1 = np.asarray(draw.rng.integers(-10, 10, size=s1) * 0.2, np.float64)
    x2 = np.asarray(draw.rng.integers(-10, 10, size=s2) * 0.2 + 0.1, np.float64)
    return Sample([x1, x2])


SPECS = [
    OpSpec("maximum", maximum, _sample, functions=(Maximum,)),
    OpSpec("minimum", minimum, _sample, functions=(Maximum,)),
]
