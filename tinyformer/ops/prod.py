"""prod: multiply the elements over `axis` (None: all of them).

Forward   y = prod_{i in axis} x_i
Backward  gx_i = gy * prod_{j != i} x_j, the product of the others. Not gy * y / x_i: that
          divides by zero wherever an x_i is 0, and a zero x_i is exactly where the product of
          the others matters (it is the whole derivative of y there). The products of the others
          are exclusive running products from both ends: with the reduced axes flattened into
          one of length n, left_i = x_0 ... x_{i-1} and right_i = x_{i+1} ... x_{n-1}, so
          prod_{j != i} x_j = left_i * right_i (two cumprods, no division).
Saved     x, the reduced axes and keepdims.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._util import expand_reduced, normalize_axes
from tinyformer.opspec import Draw, OpSpec, floats, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["prod"]


def _exclusive_cumprod(a: np.ndarray) -> np.ndarray:
    """Running products along the last axis that leave the current element out:
    (a0, a1, a2) -> (1, a0, a0 a1)."""
    xp = backend.get_array_module(a)
    shifted = xp.concatenate([xp.ones_like(a[..., :1]), a[..., :-1]], axis=-1)
    return xp.cumprod(shifted, axis=-1)


def product_of_others(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """For each element of x, the product of the other elements of its reduction group."""
    xp = backend.get_array_module(x)
    if x.size == 0:
        return xp.zeros_like(x)
    kept = [a for a in range(x.ndim) if a not in axes]
    order = kept + list(axes)
    xt = xp.transpose(x, order)
    groups = xt.reshape(xt.shape[: len(kept)] + (-1,))  # (kept..., n): one group per row
    left = _exclusive_cumprod(groups)
    right = xp.flip(_exclusive_cumprod(xp.flip(groups, -1)), -1)
    others = (left * right).reshape(xt.shape)
    return xp.transpose(others, [order.index(a) for a in range(x.ndim)])


class Prod(Function):
    @staticmethod
    def forward(ctx, x, *, axis, keepdims):
        xp = backend.get_array_module(x)
        ctx.axes, ctx.keepdims = axis, keepdims
        ctx.save_for_backward(x)
        return xp.prod(x, axis=axis, keepdims=keepdims)  # integers: int64, as torch.prod

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        g = expand_reduced(gy, x.shape, ctx.axes, ctx.keepdims)
        return g * product_of_others(x, ctx.axes)


@torch_names
def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Product over `axis` (an int, a tuple, or None for all); the gradient is exact also where
    elements are 0. PyTorch's `torch.prod` takes one dim; this takes several, as NumPy's."""
    return Prod.apply(x, axis=normalize_axes(axis, x.ndim, "prod"), keepdims=keepdims)


def _values_with_zeros(draw: Draw, shape: tuple[int, ...]) -> np.ndarray:
    # Exact zeros (none, one or two) test the backward where dividing y by x would fail.
    x = floats(draw, shape, -1.5, 1.5)
    zeros = draw.integers(0, min(2, x.size))
    x.flat[draw.rng.choice(x.size, size=zeros, replace=False)] = 0.0
    return x


SPECS = [OpSpec("prod", prod, reduction_sample(_values_with_zeros), functions=(Prod,))]
