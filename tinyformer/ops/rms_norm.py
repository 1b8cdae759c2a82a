"""rms_norm: divide by the root mean square over the trailing `normalized_shape` axes, then
scale. LLaMA-style transformers use it instead of layer_norm: no mean is subtracted and there
is no bias, one reduction per row instead of two.

Shapes    x (..., *normalized_shape); weight of `normalized_shape` (or None).
          Each row is x's trailing D = prod(normalized_shape) values.
Forward   r = 1 / sqrt(mean(x^2) + eps)   (per row),   xhat = x r,   y = xhat w
Backward  g = gy w   (the gradient reaching xhat).  With dr/dx_j = -r^3 x_j / D,
              gx_j = sum_i g_i (delta_ij r + x_i dr/dx_j) = r g_j - r^3 x_j mean(g x)
          so  gx = r (g - xhat mean(g xhat))     (the mean over the row)
          and gw = sum over rows of gy xhat.
Saved     x, w and r (one number a row): xhat is recomputed in backward instead of stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import normalized_shape_tuple
from tinyformer.ops.layer_norm import _sample as layer_norm_sample
from tinyformer.opspec import OpSpec, Sample
from tinyformer.tensor import Tensor

__all__ = ["rms_norm"]


class RMSNorm(Function):
    @staticmethod
    def forward(ctx, x, w, *, normalized_shape, eps):
        d = math.prod(normalized_shape)
        xp = backend.get_array_module(x)
        x2 = x.reshape(-1, d)  # (rows, D)
        r = 1 / xp.sqrt(xp.mean(x2 * x2, axis=1, keepdims=True) + eps)  # (rows, 1)
        y = x2 * r
        if w is not None:
            y = y * w.reshape(d)
        ctx.save_for_backward(x2, w, r)
        return y.reshape(x.shape)

    @staticmethod
    def backward(ctx, gy):
        x2, w, r = ctx.saved_tensors
        xp = backend.get_array_module(x2)
        gy2 = gy.reshape(x2.shape)  # (rows, D)
        xhat = x2 * r
        g = gy2 if w is None else gy2 * w.reshape(-1)
        gx = r * (g - xhat * xp.mean(g * xhat, axis=1, keepdims=True))
        gw = None
        if w is not None and ctx.needs_input_grad[1]:
            gw = xp.sum(gy2 * xhat, axis=0).reshape(w.shape)
        return gx.reshape(gy.shape), gw


def rms_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor | None = None,
    eps: float | None = None,
) -> Tensor:
    """RMS normalisation over the trailing `normalized_shape` axes, as in PyTorch's
    `F.rms_norm`: `eps=None` means the machine epsilon of x's dtype, PyTorch's default."""
    shape = normalized_shape_tuple(normalized_shape)
    if len(shape) > x.ndim or tuple(x.shape[x.ndim - len(shape) :]) != shape:
        raise OpError(f"rms_norm: input of shape {x.shape} does not end in {shape}")
    if weight is not None and tuple(weight.shape) != shape:
        raise OpError(f"rms_norm: weight has shape {weight.shape}, expected {shape}")
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    elif not eps >= 0:
        raise OpError(f"rms_norm: eps must be >= 0, got {eps!r}")
    return RMSNorm.apply(x, weight, normalized_shape=shape, eps=eps)


def _sample(draw) -> Sample:
    """layer_norm's samples, less the bias."""
    sample = layer_norm_sample(draw)
    x, w, _ = sample.args
    return Sample([x, w], sample.kwargs)


SPECS = [
    OpSpec(
        "rms_norm",
        # A fixed eps: the default (None) is each dtype's own epsilon, so float32 and float64
        # would compute different functions, far apart on rows of small mean square (3.8e-4
        # for a row of rms 0.015). The default has its own test (test_op_properties.py).
        lambda x, w, normalized_shape: rms_norm(x, normalized_shape, w, eps=1e-6),
        _sample,
        functions=(RMSNorm,),
    )
]
