"""matmul: matrix product with NumPy's rules (batched, broadcast batch dims, 1-D operands).

Forward   y = x1 @ x2:   (..., n, k) @ (..., k, m) -> (..., n, m); batch dims broadcast.
          A 1-D x1 is a row vector (1, k) and a 1-D x2 a column (k, 1); that axis is dropped.
Backward  gx1 = gy @ x2^T,   gx2 = x1^T @ gy   (^T swaps the last two axes), each summed over
          the batch dims it was broadcast along (`unbroadcast`).
Saved     x1 and x2.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import binary_operands, unbroadcast
from tinyformer.opspec import OpSpec, Sample, broadcastable, floats
from tinyformer.tensor import Tensor

__all__ = ["matmul"]


def check_matmul_shapes(op: str, s1: tuple[int, ...], s2: tuple[int, ...]) -> None:
    if not s1 or not s2:
        raise OpError(f"{op}: both operands need at least 1 dimension, got {s1} and {s2}")
    k1, k2 = s1[-1], s2[0] if len(s2) == 1 else s2[-2]
    if k1 != k2:
        raise OpError(f"{op}: inner dimensions differ: {s1} @ {s2} ({k1} != {k2})")
    try:
        np.broadcast_shapes(s1[:-2], s2[:-2])
    except ValueError:
        raise OpError(f"{op}: batch dimensions of {s1} and {s2} do not broadcast") from None


class MatMul(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        check_matmul_shapes("matmul", x1.shape, x2.shape)
        ctx.save_for_backward(x1, x2)
        return x1 @ x2

    @staticmethod
    def backward(ctx, gy):
        x1, x2 = ctx.saved_tensors
        xp = backend.get_array_module(x1, x2)
        # Give 1-D operands, and gy, back the matrix axis NumPy dropped.
        a = x1[None, :] if x1.ndim == 1 else x1  # (..., n, k)
        b = x2[:, None] if x2.ndim == 1 else x2  # (..., k, m)
        if x1.ndim == 1 and x2.ndim == 1:
            g = gy.reshape(1, 1)
        elif x1.ndim == 1:
            g = gy[..., None, :]  # (..., 1, m)
        elif x2.ndim == 1:
            g = gy[..., None]  # (..., n, 1)
        else:
            g = gy  # (..., n, m)
        gx1 = gx2 = None
        if ctx.needs_input_grad[0]:
            ga = g @ xp.swapaxes(b, -1, -2)
            gx1 = unbroadcast(ga[..., 0, :] if x1.ndim == 1 else ga, x1.shape)
        if ctx.needs_input_grad[1]:
            gb = xp.swapaxes(a, -1, -2) @ g
            gx2 = unbroadcast(gb[..., 0] if x2.ndim == 1 else gb, x2.shape)
        return gx1, gx2


def matmul(x1: Any, x2: Any) -> Tensor:
    """Matrix product `x1 @ x2` with NumPy's batching and broadcasting rules."""
    return MatMul.apply(*binary_operands(x1, x2))


def _sample(draw) -> Sample:
    n, k, m = draw.integers(1, 4), draw.integers(1, 4), draw.integers(1, 4)
    batch = draw.shape(min_dims=0, max_dims=2)
    kind = draw.choice(["matrix", "vector_left", "vector_right", "vector_both"])
    s1 = (k,) if kind in ("vector_left", "vector_both") else (*broadcastable(draw, batch), n, k)
    s2 = (k,) if kind in ("vector_right", "vector_both") else (*broadcastable(draw, batch), k, m)
    return Sample([floats(draw, s1), floats(draw, s2)])


SPECS = [OpSpec("matmul", matmul, _sample, functions=(MatMul,))]
