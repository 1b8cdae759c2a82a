"""layer_norm: normalise over the trailing `normalized_shape` axes, then scale and shift.

Shapes    x (..., *normalized_shape); weight and bias of `normalized_shape` (or None).
          The primitives see x as (rows, D), D = prod(normalized_shape).
Forward   mu = mean(x),  rstd = 1 / sqrt(var(x) + eps)   (population variance, per row)
          xhat = (x - mu) * rstd,   y = xhat * w + b
Backward  gx, gw, gb from gy and what was saved: x reaches y through both mu and rstd. (The
          derivation sits with the code, in `layer_norm_backward`.)
Saved     x, w, and per row mu and rstd (two numbers a row): xhat is recomputed in backward
          instead of stored, which saves a (rows, D) array for one cheap pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import normalized_shape_tuple
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["layer_norm"]


@registry.reference("layer_norm.forward")
def layer_norm_forward(x, w, b, eps):
    """x (rows, D) -> y (rows, D), mu (rows,), rstd (rows,)."""
    ### BEGIN SOLUTION A2.4 forward
    xp = backend.get_array_module(x)
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / xp.sqrt((xc * xc).mean(axis=1, keepdims=True) + eps)
    y = xc * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mu[:, 0], rstd[:, 0]
    ### END SOLUTION


@registry.reference("layer_norm.backward")
def layer_norm_backward(gy, x, w, mu, rstd):
    """-> gx (rows, D), gw (D,), gb (D,)."""
    ### BEGIN SOLUTION A2.4 backward
    # g = gy * w is the gradient reaching xhat. Through x - mu and through rstd (which depends
    # on x through the variance), with means over the row:
    #   gx = rstd * (g - mean(g) - xhat * mean(g * xhat))
    #   gw = sum over rows of gy * xhat,   gb = sum over rows of gy
    xhat = (x - mu[:, None]) * rstd[:, None]
    g = gy * w if w is not None else gy
    gx = rstd[:, None] * (
        g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True)
    )
    return gx, (gy * xhat).sum(axis=0), gy.sum(axis=0)
    ### END SOLUTION


class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, w, b, *, normalized_shape, eps):
        d = math.prod(normalized_shape)
        x2 = x.reshape(-1, d)  # (rows, D)
        w2 = None if w is None else w.reshape(d)
        b2 = None if b is None else b.reshape(d)
        y, mu, rstd = registry.call("layer_norm.forward", x2, w2, b2, eps)
        ctx.normalized_shape = normalized_shape
        ctx.save_for_backward(x2, w2, mu, rstd)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x2, w2, mu, rstd = ctx.saved_tensors
        g2 = gy.reshape(x2.shape)
        gx, gw, gb = registry.call("layer_norm.backward", g2, x2, w2, mu, rstd)
        need_w, need_b = ctx.needs_input_grad[1:]
        shape = ctx.normalized_shape
        return (
            gx.reshape(gy.shape),
            gw.reshape(shape) if need_w else None,
            gb.reshape(shape) if need_b else None,
        )


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Layer normalisation over the trailing `normalized_shape` axes, as in PyTorch."""
    shape = normalized_shape_tuple(normalized_shape)
    if tuple(x.shape[len(x.shape) - len(shape) :]) != shape or len(shape) > x.ndim:
        raise OpError(f"layer_norm: input of shape {x.shape} does not end in {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise OpError(f"layer_norm: {name} has shape {p.shape}, expected {shape}")
    return LayerNorm.apply(x, weight, bias, normalized_shape=shape, eps=eps)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, min_side=2)
    k = draw.integers(1, min(2, len(shape)))
    norm = shape[len(shape) - k :]
    w = floats(draw, norm, 0.5, 1.5) if draw.integers(0, 1) else None
    b = floats(draw, norm) if draw.integers(0, 1) else None
    return Sample([floats(draw, shape), w, b], {"normalized_shape": norm})


SPECS = [
    OpSpec(
        "layer_norm",
        lambda x, w, b, normalized_shape: layer_norm(x, normalized_shape, w, b),
        _sample,
        functions=(LayerNorm,),
        primitives=("layer_norm.forward", "layer_norm.backward"),
    )
]
