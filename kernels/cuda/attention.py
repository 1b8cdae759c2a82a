"""CUDA kernels for fused scaled-dot-product attention, forward and backward (plan in
attention.cu): tiles in shared memory, online softmax, the (Tq, Tk) scores never stored.

The wrapper flattens the broadcast batch dims into one: q, k, v, gy, y become contiguous
(BH, T, d) arrays (copied only when broadcast or strided), and the gradients come back with the
full batch shape, as the reference's do (the Function sums them over broadcast dims). The mask is
never broadcast to (BH, Tq, Tk): the kernels read it through strides, 0 where it broadcasts.
Head dims up to 128 run here; wider ones run the reference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, SUFFIX
from tinyformer.registry import kernel

__all__ = ["attention_backward", "attention_forward", "head_bound"]

THREADS = 128  # 32 * WARPS in attention.cu
# Compiled bounds on max(d, dv), one entry point each, by dtype (float64 is for checking).
HEAD_BOUNDS = {"float32": (32, 64, 128), "float64": (128,)}
# The tiles attention.cu picks (`Tiles`), by dtype and head bound: query rows per block of the
# forward and of backward_q, keys per block of backward_kv. They size the grids only: the
# kernels loop over tiles, so a stale entry here costs speed, never correctness.
FORWARD_ROWS = {"float32": {32: 16, 64: 16, 128: 16}, "float64": {128: 8}}
BACKWARD_ROWS = {"float32": {32: 16, 64: 16, 128: 8}, "float64": {128: 4}}
KEYS = {"float32": {32: 32, 64: 32, 128: 32}, "float64": {128: 16}}
MAX_GRID_Y = 65535  # CUDA's limit; the kernels loop over the pairs past it
NO_MASK, KEEP, BIAS = 0, 1, 2  # MaskKind in attention.cu


def _module() -> _runtime.Module:
    return _runtime.load("attention")


def head_bound(q: Any, v: Any) -> int | None:
    """The smallest compiled head-dim bound that fits q's and v's head dims (None: none does)."""
    widest = max(q.shape[-1], v.shape[-1])
    return next((b for b in HEAD_BOUNDS[q.dtype.name] if widest <= b), None)


def _batch(q: Any, k: Any, v: Any) -> tuple[int, ...]:
    """The broadcast leading (batch, head) dims."""
    if q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return q.shape[:-2]
    return np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])


def _flat(a: Any, batch: tuple[int, ...]) -> Any:
    """(..., T, d) broadcast to the full batch, as a contiguous (BH, T, d) array."""
    xp = get_array_module(a)
    if a.shape[:-2] != batch:
        a = xp.broadcast_to(a, (*batch, *a.shape[-2:]))
    return xp.ascontiguousarray(a).reshape(math.prod(batch), *a.shape[-2:])


def _mask_args(mask: Any, batch: tuple[int, ...], like: Any) -> tuple:
    """(kind, keep, bias, heads, b, h, i, j): how the kernels read the mask. Pair bh = (lead,
    head) with heads = the last batch dim; element (bh, i, j) sits at lead * b + head * h +
    i * i_stride + j * j_stride, strides 0 along the dims the mask broadcasts over. Leading dims
    that broadcast only partly are copied out to full size (the rows and columns never are)."""
    heads = max(1, batch[-1]) if batch else 1
    if mask is None:
        return NO_MASK, like, like, heads, 0, 0, 0, 0
    xp = get_array_module(like)
    m = mask.reshape((1,) * (len(batch) + 2 - mask.ndim) + tuple(mask.shape))
    lead, (mq, mk) = m.shape[:-2], m.shape[-2:]
    mh = lead[-1] if lead else 1
    b_stride = 0
    if any(n != 1 for n in lead[:-1]):  # the mask varies over the leading (batch) dims
        m = xp.broadcast_to(m, (*batch[:-1], mh, mq, mk))
        b_stride = mh * mq * mk
    h_stride = mq * mk if mh > 1 else 0
    strides = (b_stride, h_stride, mk if mq > 1 else 0, 1 if mk > 1 else 0)
    if m.dtype == np.bool_:
        return KEEP, xp.ascontiguousarray(m), like, heads, *strides
    bias = xp.ascontiguousarray(m.astype(like.dtype, copy=False))
    return BIAS, like, bias, heads, *strides


def _grid(items: int, per_block: int, bh: int) -> tuple[int, int]:
    """(tiles along x, pairs along y)."""
    return _runtime.blocks(items, per_block), min(bh, MAX_GRID_Y)


def heads_fit(q: Any, k: Any, v: Any, *rest: Any) -> bool:
    """the head dims are at most 128 (the widest compiled tiles)"""
    return head_bound(q, v) is not None


def heads_fit_backward(gy: Any, q: Any, k: Any, v: Any, *rest: Any) -> bool:
    """the head dims are at most 128 (the widest compiled tiles)"""
    return head_bound(q, v) is not None


@kernel("attention.forward", backend="cuda", dtypes=FLOATS, accepts=heads_fit)
def attention_forward(q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float) -> Any:
    bound = head_bound(q, v)
    xp = get_array_module(q)
    batch = _batch(q, k, v)
    q3, k3, v3 = (_flat(a, batch) for a in (q, k, v))
    (bh, tq, d), tk, dv = q3.shape, k3.shape[1], v3.shape[2]
    y = xp.empty((bh, tq, dv), q.dtype)
    lse = xp.empty((bh, tq), q.dtype)
    if bh and tq:
        kind, keep, bias, heads, *strides = _mask_args(mask, batch, q3)
        grid = _grid(tq, FORWARD_ROWS[q.dtype.name][bound], bh)
        args = (q3, k3, v3, keep, bias, y, lse, bh, tq, tk, d, dv, int(causal), kind, heads)
        name = f"attention_forward_d{bound}_{SUFFIX[q.dtype.name]}"
        _module().launch(name, grid, THREADS, (*args, *strides, scale))
    return y.reshape(*batch, tq, dv), lse.reshape(*batch, tq)


@kernel("attention.backward", backend="cuda", dtypes=FLOATS, accepts=heads_fit_backward)
def attention_backward(
    gy: Any, q: Any, k: Any, v: Any, y: Any, lse: Any, mask: Any, causal: bool, scale: float
) -> tuple[Any, Any, Any]:
    bound = head_bound(q, v)
    xp = get_array_module(q)
    batch = _batch(q, k, v)
    bthd = _heads_interleaved(gy, q, k, v)
    gy3, q3, k3, v3, y3 = (_flat(a, batch) for a in (gy, q, k, v, y))
    (bh, tq, d), tk, dv = q3.shape, k3.shape[1], v3.shape[2]
    lse2 = _flat(lse[..., None], batch).reshape(bh, tq)
    if bthd:  # (B, T, H, width) memory, handed back as (B, H, T, width) views
        b, h = batch
        gq, gk, gv = (xp.empty((b, t, h, w), q.dtype) for t, w in ((tq, d), (tk, d), (tk, dv)))
    else:
        gq, gk, gv = xp.empty_like(q3), xp.empty_like(k3), xp.empty_like(v3)
    if bh and (tq or tk):
        kind, keep, bias, heads, *strides = _mask_args(mask, batch, q3)
        dtype, suffix = q.dtype.name, SUFFIX[q.dtype.name]
        shape = (bh, tq, tk, d, dv, int(causal), kind, heads, *strides, int(bthd), scale)
        rowdot = xp.empty((bh, tq), q.dtype)  # D_i = gy_i . y_i, from backward_q to backward_kv
        if tq:
            grid = _grid(tq, BACKWARD_ROWS[dtype][bound], bh)
            args = (gy3, q3, k3, v3, y3, lse2, keep, bias, rowdot, gq, *shape)
            _module().launch(f"attention_backward_q_d{bound}_{suffix}", grid, THREADS, args)
        if tk:
            grid = _grid(tk, KEYS[dtype][bound], bh)
            args = (gy3, q3, k3, v3, lse2, rowdot, keep, bias, gk, gv, *shape)
            _module().launch(f"attention_backward_kv_d{bound}_{suffix}", grid, THREADS, args)
    if bthd:
        return gq.transpose(0, 2, 1, 3), gk.transpose(0, 2, 1, 3), gv.transpose(0, 2, 1, 3)
    return (
        gq.reshape(*batch, tq, d),
        gk.reshape(*batch, tk, d),
        gv.reshape(*batch, tk, dv),
    )


def _heads_interleaved(gy: Any, q: Any, k: Any, v: Any) -> bool:
    """Whether gy is a (B, H, T, dv) view of (B, T, H, dv) memory (heads merged back into one
    projection, as a transformer does) while q, k and v need no broadcasting: then the kernels
    write gq, gk and gv in that layout too (attention.cu), so that the gradients reach the
    projection they were split from without a copy each."""
    if gy.ndim != 4 or gy.flags.c_contiguous or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        return False
    return gy.transpose(0, 2, 1, 3).flags.c_contiguous and gy.shape[:-2] == q.shape[:-2]
