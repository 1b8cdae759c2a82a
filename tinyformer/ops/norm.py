"""norm: the vector p-norm over `axis` (None: all elements), as `torch.linalg.vector_norm`.

Forward   p = 2:    y = sqrt(sum x_i^2)
          p = 1:    y = sum |x_i|
          p = inf:  y = max |x_i|
          other p >= 1:  y = (sum |x_i|^p)^(1/p)
Backward  p = 2:    gx = gy * x / y
          p = 1:    gx = gy * sign(x)
          p = inf:  gx = gy * sign(x) * [|x| == y] / count(|x| == y)  (ties share, as amax)
          other p:  gx = gy * sign(x) |x|^(p-1) / y^(p-1)
          Where y = 0 (an all-zero vector) the gradient is 0, as PyTorch gives: the norm has a
          kink there and 0 is in its subgradient.
Saved     x and y (y with the reduced axes kept, to broadcast against x).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.opspec import Draw, OpSpec, Sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["norm"]


def vector_norm(x: np.ndarray, p: float, axes: tuple[int, ...]) -> np.ndarray:
    """The p-norm over `axes`, the axes kept (size 1)."""
    xp = backend.get_array_module(x)
    a = xp.abs(x)
    if p == 2:
        return xp.sqrt(xp.sum(x * x, axis=axes, keepdims=True))
    if p == 1:
        return xp.sum(a, axis=axes, keepdims=True)
    if p == math.inf:
        return xp.max(a, axis=axes, keepdims=True)
    return xp.sum(a**p, axis=axes, keepdims=True) ** (1.0 / p)


def norm_backward(gy: np.ndarray, x: np.ndarray, y: np.ndarray, p: float, axes) -> np.ndarray:
    """gx for the saved x and y (y with the axes kept) and gy broadcast to x's shape."""
    xp = backend.get_array_module(x)
    if p == 1:
        return gy * xp.sign(x)
    zero = y == 0
    safe_y = xp.where(zero, 1.0, y)  # the gradient is 0 there; avoid 0/0
    if p == 2:
        return xp.where(zero, 0.0, gy * x / safe_y)
    if p == math.inf:
        is_max = xp.abs(x) == y
        count = xp.sum(is_max, axis=axes, keepdims=True)
        return xp.where(zero, 0.0, gy * xp.sign(x) * is_max / count)
    scale = xp.sign(x) * (xp.abs(x) / safe_y) ** (p - 1.0)  # |x|^(p-1) / y^(p-1), no overflow
    return xp.where(zero, 0.0, gy * scale)


class Norm(Function):
    @staticmethod
    def forward(ctx, x, *, p, axis, keepdims):
        y = vector_norm(x, p, axis).astype(x.dtype, copy=False)
        ctx.p, ctx.axes, ctx.keepdims = p, axis, keepdims
        ctx.save_for_backward(x, y)
        return y if keepdims else y.reshape([n for a, n in enumerate(y.shape) if a not in axis])

    @staticmethod
    def backward(ctx, gy):
        x, y = ctx.saved_tensors
        g = expand_reduced(gy, x.shape, ctx.axes, ctx.keepdims)
        return norm_backward(g, x, y, ctx.p, ctx.axes).astype(gy.dtype, copy=False)


def _order(p: Any) -> float:
    if p == "fro":  # Frobenius: the 2-norm of the elements, however many axes
        return 2.0
    if isinstance(p, str) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise OpError(f"norm: p must be a number >= 1, inf or 'fro', got {p!r}")
    if not (p >= 1):  # also catches nan
        raise OpError(
            f"norm: p = {p} is not supported; use p >= 1 or inf (p < 1 is no norm, and its "
            "gradient is infinite at zeros)"
        )
    return float(p)


@torch_names
def norm(x: Tensor, p: Any = 2, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The p-norm of the elements over `axis` (an int, a tuple, or None for all), as
    `torch.linalg.vector_norm(x, ord=p, dim=axis)` and `x.norm(p, dim)`. `p` is a float >= 1,
    `math.inf` or "fro" (= 2). The gradient of an all-zero vector is 0, as in PyTorch.

    Shapes:
        x (...) -> the reduced axes removed (kept as size 1 with `keepdims`).
    """
    order = _order(p)
    if x.dtype.kind != "f":
        raise OpError(f"norm: expects a floating-point tensor, got {x.dtype} (use x.float())")
    return Norm.apply(x, p=order, axis=normalize_axes(axis, x.ndim, "norm"), keepdims=keepdims)


def _sample(draw: Draw) -> Sample:
    shape = draw.shape(min_dims=1)
    n, ndim = math.prod(shape), len(shape)
    # Distinct magnitudes away from 0, with random signs: no kinks for p = 1 (at 0) or inf (at
    # ties of |x|).
    magnitude = 0.2 + draw.rng.permutation(n) * (1.5 / n)
    x = (magnitude * draw.rng.choice([-1.0, 1.0], size=n)).reshape(shape)
    axis = draw.choice([None, draw.integers(-ndim, ndim - 1), tuple(range(ndim))[::2]])
    p = draw.choice([2, 1, math.inf, 3.0, 1.5])
    return Sample([x], {"p": p, "axis": axis, "keepdims": bool(draw.integers(0, 1))})


SPECS = [OpSpec("norm", norm, _sample, functions=(Norm,))]
