"""tril, triu: the lower (upper) triangle of the last two axes, zeros elsewhere.

Forward   y[..., i, j] = x[..., i, j] if j - i <= k else 0     (tril; triu keeps j - i >= k)
Backward  gx[..., i, j] = gy[..., i, j] where the triangle kept x, else 0
Saved     nothing: the triangle is rebuilt from the shape and k (`xp.tri`).

k (`diagonal`) shifts the triangle: tril with k = 0 keeps the main diagonal, k = -1 drops it.
`tf.tril(tf.ones(T, T))` is nanoGPT's causal mask, a (T, T) matrix of ones on and below the
diagonal.
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["tril", "triu"]


def _keep(xp, shape, diagonal, lower):
    """Boolean (rows, cols) mask of the kept triangle, made by the array module `xp`."""
    rows, cols = shape[-2:]
    if lower:
        return xp.tri(rows, cols, diagonal, dtype=bool)
    return ~xp.tri(rows, cols, diagonal - 1, dtype=bool)


class Triangle(Function):
    @staticmethod
    def forward(ctx, x, *, diagonal, lower):
        xp = backend.get_array_module(x)
        ctx.diagonal, ctx.lower = diagonal, lower
        return xp.where(_keep(xp, x.shape, diagonal, lower), x, xp.zeros((), x.dtype))

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        keep = _keep(xp, gy.shape, ctx.diagonal, ctx.lower)
        return xp.where(keep, gy, xp.zeros((), gy.dtype))


def _triangle(op, x, diagonal, lower):
    if x.ndim < 2:
        raise OpError(f"{op}: needs a matrix (or a batch of them), got shape {x.shape}")
    if not isinstance(diagonal, (int, np.integer)) or isinstance(diagonal, bool):
        raise OpError(f"{op}: diagonal must be an integer, got {diagonal!r}")
    return Triangle.apply(x, diagonal=int(diagonal), lower=lower)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of x's last two axes: elements with j - i <= diagonal, zeros above."""
    return _triangle("tril", x, diagonal, lower=True)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of x's last two axes: elements with j - i >= diagonal, zeros below."""
    return _triangle("triu", x, diagonal, lower=False)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=2, max_dims=3)
    return Sample([floats(draw, shape)], {"diagonal": int(draw.integers(-2, 2))})


SPECS = [
    OpSpec("tril", tril, _sample, functions=(Triangle,)),
    OpSpec("triu", triu, _sample, functions=(Triangle,)),
]
