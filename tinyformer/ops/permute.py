"""permute and transpose: reorder the axes.

Forward   y = x with axes reordered: y.shape[i] = x.shape[axes[i]]
Backward  gx = gy permuted by the inverse permutation (argsort(axes))
Saved     the permutation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import normalize_axes
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import shape_arg

__all__ = ["permute", "transpose"]


class Permute(Function):
    @staticmethod
    def forward(ctx, x, *, axes):
        # each axis in range and none repeated (5 % 2 == 1 alone would let (0, 5) through)
        if len(normalize_axes(axes, x.ndim, "permute")) != x.ndim:
            raise OpError(f"permute: {axes} is not a permutation of the {x.ndim} axes of {x.shape}")
        xp = backend.get_array_module(x)
        ctx.axes = axes
        return xp.transpose(x, axes)

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        inverse = np.argsort([a % gy.ndim for a in ctx.axes]).tolist()  # Python ints: any device
        return xp.transpose(gy, inverse)


def permute(x: Tensor, *axes: Any) -> Tensor:
    """Reorder the axes: `permute(x, 0, 2, 1)` or `permute(x, (0, 2, 1))`."""
    return Permute.apply(x, axes=shape_arg(axes))


def transpose(x: Tensor, axis0: int = -2, axis1: int = -1) -> Tensor:
    """Swap two axes (the last two by default)."""
    (a0,), (a1,) = (normalize_axes(a, x.ndim, "transpose") for a in (axis0, axis1))
    axes = list(range(x.ndim))
    axes[a0], axes[a1] = axes[a1], axes[a0]
    return Permute.apply(x, axes=tuple(axes))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=4)
    n = len(shape)
    # some axes counted from the end, as users write them: backward must normalise them too
    axes = tuple(int(a) - n * draw.integers(0, 1) for a in draw.rng.permutation(n))
    return Sample([floats(draw, shape)], {"axes": axes})


def _sample_transpose(draw) -> Sample:
    shape = draw.shape(min_dims=2, max_dims=4)
    n = len(shape)
    return Sample([floats(draw, shape)], {"axis0": draw.integers(-n, n - 1), "axis1": -1})


SPECS = [
    OpSpec("permute", lambda x, axes: permute(x, axes), _sample, functions=(Permute,)),
    OpSpec("transpose", transpose, _sample_transpose, functions=(Permute,)),
]
