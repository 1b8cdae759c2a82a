"""Fused scaled-dot-product attention, tiled in the flash-attention manner.

Queries go in tiles of Bq rows; the scores of a tile, S = Q_tile K^T (Bq x Tk for each (batch,
head) pair), exist only while that tile is processed, never the whole (Tq, Tk) matrix.

Forward, per tile:  S = Q_tile K^T  ->  [Numba, in place] scale, mask, row max, exp, normalise
                    into P, and one log-sum-exp per row  ->  Y_tile = P V.
                    Saved: Y and lse, one number per query row.
Backward, per tile: S = Q_tile K^T and dP = dY_tile V^T  ->  [Numba, in place] P = exp(S - lse)
                    and dS = P (dP - D) scale with D = rowsum(dY * Y)  ->  dQ_tile = dS K,
                    dK += dS^T Q_tile, dV += P^T dY_tile.

The tile products are matrix multiplications. Numba has no fast matmul of its own (np.dot inside
njit needs SciPy's BLAS, and hand-written loops reached ~15 GFLOP/s here), so they go through
NumPy's BLAS; the elementwise work between them, where NumPy makes several passes and
temporaries over each (Bq, Tk) tile, is one fused parallel Numba pass.

Memory: a tile holds at most TILE_ELEMENTS scores over all (batch, head) pairs, so for long
sequences the tile height shrinks and memory grows linearly in T. Causal tiles stop at the last
key their last query may see. Leading dims broadcast; a mask is read as a flat buffer, each
(batch, head) pair from its own start, so a broadcast one is not copied (`_masks`).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._attention_short import (
    SHORT_HEAD,
    SHORT_KEYS,
    exp_shifted,
    mask_rows,
    pairs_backward,
    pairs_forward,
)
from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, element_strides, read_only, span
from tinyformer.registry import kernel

TILE_ELEMENTS = 1 << 20  # scores held at once: 4 MiB in float32
# Causal tiles hold at most this many queries. One head of 1024 keys fits TILE_ELEMENTS in a
# single tile, which stops at the last key and so skips nothing of the masked half; in tiles of
# 512 queries the products skip a quarter of the scores (the reference computes them all).
CAUSAL_ROWS = 512
MIN_SCORES = 1 << 15  # below this the fixed costs lose to the reference (docs/kernels.md)


def short(q, k, v) -> bool:
    """At most SHORT_KEYS keys and head sizes up to SHORT_HEAD: one thread per (batch, head)
    pair (_attention_short), else the tiles below."""
    return k.shape[-2] <= SHORT_KEYS and max(q.shape[-1], v.shape[-1]) <= SHORT_HEAD


def big_enough(q, k, v, mask=None, causal=False, *rest) -> bool:
    """there are at least 2**15 scores (batch x heads x Tq x Tk) and, for at most 256 keys and
    head sizes up to 128 (where one thread takes each (batch, head) pair), at least two pairs or
    a causal mask"""
    # A single pair on the short path runs on one thread against BLAS's two. Causal, it skips
    # the half of the scores that the reference computes and then masks, and wins; not causal,
    # it loses at the larger sizes (docs/kernels.md, "Attention").
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    pairs = math.prod(batch)
    if short(q, k, v) and pairs < 2 and not causal:
        return False
    return pairs * q.shape[-2] * k.shape[-2] >= MIN_SCORES


def big_enough_backward(gy, q, k, v, y, lse, mask=None, causal=False, *rest) -> bool:
    """there are at least 2**15 scores (batch x heads x Tq x Tk) and, for at most 256 keys and
    head sizes up to 128 (where one thread takes each (batch, head) pair), at least two pairs or
    a causal mask"""
    return big_enough(q, k, v, mask, causal)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _softmax_tile(s, row0, keep, bias, starts, row_steps, flags, scale, lse):
    """In place: raw scores s (BH, Bq, Kn) of query rows row0.. -> weights; fills lse rows."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, bq, kn = s.shape
    zero, neg_inf = s.dtype.type(0), s.dtype.type(-np.inf)
    for item in prange(bh * bq):
        b, r = item // bq, item % bq
        i = row0 + r
        row = s[b, r]
        keep_row, bias_row = mask_rows(keep, bias, starts, row_steps, b, i, kn)
        n = min(i + 1, kn) if causal else kn
        for j in range(n):
            v = row[j] * scale
            if has_bias:
                v += bias_row[j]
            if has_keep and not keep_row[j]:
                v = neg_inf
            row[j] = v
        top = row_max(row, n) if n else neg_inf
        for j in range(n, kn):
            row[j] = zero
        if top == neg_inf:  # every key masked: weights 0, output 0, lse +inf (exp(s - inf) = 0)
            row[:n] = zero
            lse[b, i] = np.inf
            continue
        total = exp_shifted(row, n, top)
        inv = s.dtype.type(1) / total
        for j in range(n):
            row[j] *= inv
        lse[b, i] = top + np.log(total)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _softmax_grad_tile(s, dp, gy, y, row0, keep, bias, starts, row_steps, flags, scale, lse):
    """In place: raw scores s -> P = exp(s * scale + mask - lse); dp = dY V^T -> dS * scale."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, bq, kn = s.shape
    zero, neg_inf = s.dtype.type(0), s.dtype.type(-np.inf)
    for item in prange(bh * bq):
        b, r = item // bq, item % bq
        i = row0 + r
        row, dp_row, gy_row, y_row = s[b, r], dp[b, r], gy[b, i], y[b, i]
        keep_row, bias_row = mask_rows(keep, bias, starts, row_steps, b, i, kn)
        n = min(i + 1, kn) if causal else kn
        big_d = zero  # D_i = dY_i . Y_i = sum_j P_ij (dY_i . V_j)
        for t in range(gy_row.size):
            big_d += gy_row[t] * y_row[t]
        lse_i = lse[b, i]
        for j in range(n):
            v = row[j] * scale
            if has_bias:
                v += bias_row[j]
            if has_keep and not keep_row[j]:
                v = neg_inf
            p = exp_nonpositive(v - lse_i)
            row[j] = p
            dp_row[j] = p * (dp_row[j] - big_d) * scale
        for j in range(n, kn):
            row[j] = zero
            dp_row[j] = zero


def _flatten(a: np.ndarray, batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """a (..., X, Y) as (M, X, Y) over its own leading dims, and for each of the prod(batch)
    broadcast batch entries the index of its slice."""
    lead = a.shape[:-2]
    flat = a.reshape(-1, *a.shape[-2:])  # keeps zero strides of broadcast trailing dims
    index = np.arange(flat.shape[0]).reshape((1,) * (len(batch) - len(lead)) + lead)
    return flat, np.broadcast_to(index, batch).reshape(-1)


@functools.lru_cache(maxsize=64)
def _unused_masks(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Stand-ins for the keep and bias masks a call does not have: one element each, read with
    row step 0 (`mask_rows`), so that taking a row, as the kernels do before they test the flags,
    stays in bounds (NUMBA_BOUNDSCHECK=1, NUMBA_DISABLE_JIT=1). Read-only, shared between calls."""
    return read_only(np.ones(1, np.bool_)), read_only(np.zeros(1, dtype))


@functools.lru_cache(maxsize=64)
def _no_masks(pairs: int, dtype: np.dtype, causal: bool):
    """`_masks` of a call without a mask, made once per shape and shared (read-only): what a
    GPT's every call passes, not built again at every call."""
    keep, bias = _unused_masks(dtype)
    starts, row_steps = np.zeros((2, pairs), np.int64), np.zeros(2, np.int64)
    return keep, bias, read_only(starts), read_only(row_steps), read_only(_flags(None, causal))


def _flags(mask, causal: bool) -> np.ndarray:
    is_bool = mask is not None and mask.dtype == np.bool_
    return np.array([is_bool, mask is not None and not is_bool, causal])


def _masks(mask, batch, tq, tk, dtype, causal):
    """(keep, bias, starts, row_steps, flags), all read-only. keep and bias are flat buffers
    (an unused one a stand-in, `_unused_masks`); pair b's (tq, tk) slice of mask m starts at
    element starts[m, b] of its buffer, its rows row_steps[m] elements apart.

    Why flat: the kernels are compiled once per dtype whatever the mask's layout. As (M, Tq, Tk)
    arrays, a contiguous mask and a broadcast one are two Numba types, and each pair of mask
    types cost every attention kernel a compile of its own, seconds each.
    A broadcast mask is not copied (its zero strides become a row step of 0 or shared starts)
    unless its keys are not contiguous."""
    if mask is None:
        return _no_masks(math.prod(batch), np.dtype(dtype), bool(causal))
    keep, bias = _unused_masks(np.dtype(dtype))
    starts, row_steps = np.zeros((2, math.prod(batch)), np.int64), np.zeros(2, np.int64)
    mask3, mask_i = _flatten(np.broadcast_to(mask, (*mask.shape[:-2], tq, tk)), batch)
    if mask3.size:  # else no row is read
        if not _rows_contiguous(mask3):
            mask3 = np.ascontiguousarray(mask3)
        which = 0 if mask.dtype == np.bool_ else 1
        step, row_steps[which], _ = element_strides(mask3)
        starts[which] = mask_i * step
        if which == 0:
            keep = span(mask3)
        else:
            bias = span(mask3)
    masks = keep, bias, starts, row_steps, _flags(mask, causal)
    return tuple(read_only(a) for a in masks)


def _as_batch(a: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """(..., T, d) broadcast to the full batch, as (BH, T, d) (copied only if broadcast)."""
    return np.broadcast_to(a, (*batch, *a.shape[-2:])).reshape(-1, *a.shape[-2:])


def _pairs(batch: tuple[int, ...]) -> tuple[int, int]:
    """The leading dims as (B, H): missing ones are 1, extra ones merge into B."""
    full = (1, 1, *batch)
    return math.prod(full[:-1]), full[-1]


def _as_pairs(a: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """(..., T, d) broadcast to the full batch, as a (B, H, T, d) view: for the usual 4-D input
    (a transposed (B, T, H, d) projection, say) that is `a` itself, strided as it comes. (More
    than two leading dims merge, maybe with a copy.)"""
    if a.shape[:-2] == batch and len(batch) == 2:
        return a
    return np.broadcast_to(a, (*batch, *a.shape[-2:])).reshape(*_pairs(batch), *a.shape[-2:])


def rows_of(arrays, batch: tuple[int, ...]) -> tuple[list[np.ndarray], list[list[int]]]:
    """Each array as (B, H, T, d) (`_as_pairs`) seen as a read-only flat buffer over the memory
    it spans, and each one's element strides for (batch, head, row).

    Why: the short kernels slice rows out of the buffers, which Numba compiles as contiguous
    (vectorised) loops; rows of a strided 4-D view compile as strided loops, which do not
    vectorise. An array
    is copied first only if its rows are not contiguous or a stride is negative."""
    buffers, steps = [], []
    for a in arrays:
        a = _as_pairs(a, batch)
        if not _rows_contiguous(a):
            a = np.ascontiguousarray(a)
        steps.append(element_strides(a)[:3])  # batch, head, row
        buffer = span(a)  # a view of its own: made read-only without touching `a`
        buffer.flags.writeable = False
        buffers.append(buffer)
    return buffers, steps


def gradients_like(q, k, v, batch: tuple[int, ...]):
    """Empty gradients for q, k and v, their flat buffers and element strides, each laid out as
    `empty_like_rows` lays it out; and when q, k and v are disjoint slices of one array that they
    fill (a transformer's fused QKV projection, cut by `split`), the gradients are the same
    slices of one new array. `split`'s backward then finds its three pieces side by side in one
    array and returns that array instead of a concatenated copy."""
    arrays, owner = (q, k, v), q.base
    if (
        owner is None
        or not owner.flags.c_contiguous
        or len(batch) != 2
        or any(
            a.base is not owner or a.shape[:-2] != batch or not _rows_contiguous(a) for a in arrays
        )
        or sum(a.size for a in arrays) != owner.size
        or _overlap(arrays)
    ):
        grads, flat, steps = zip(*(empty_like_rows(a, batch, *a.shape[-2:]) for a in arrays))
        return grads, flat, steps
    whole = np.empty(owner.shape, owner.dtype)
    start = owner.__array_interface__["data"][0]
    grads = [
        np.ndarray(a.shape, a.dtype, whole, a.__array_interface__["data"][0] - start, a.strides)
        for a in arrays
    ]
    return grads, [span(g) for g in grads], [element_strides(g)[:3] for g in grads]


def _rows_contiguous(a: np.ndarray) -> bool:
    """a's rows are contiguous and no stride is negative: what the kernels' flat buffers need
    (rows_of copies inputs that are not so; a gradient laid out like one must be so itself)."""
    return a.strides[-1] == a.itemsize and min(a.strides) >= 0


def _overlap(arrays) -> bool:
    """Two of the arrays may share an element (or it would take too long to tell)."""
    for i, a in enumerate(arrays):
        for b in arrays[i + 1 :]:
            try:
                if np.shares_memory(a, b, max_work=1000):
                    return True
            except np.exceptions.TooHardError:
                return True
    return False


def empty_like_rows(a: np.ndarray, batch: tuple[int, ...], rows: int, width: int):
    """An empty (*batch, rows, width) output laid out in memory as `a` is, with its flat buffer
    and its (batch, head, row) element strides (as `rows_of` gives them).

    Why: in a transformer, Q, K and V are transposed views of (B, T, H, d) projections. An output
    laid out the same way, (B, T, H, width) memory seen as (B, H, T, width) (as PyTorch's
    attention returns it), turns back into (B, T, C) by a transpose and a reshape that copy
    nothing, forward and backward; a (B, H, T, width) output made both passes copy (16 copies
    per baby-GPT step). The layout never changes the values."""
    n_b, n_h = _pairs(batch)
    if len(batch) == 2 and a.shape[:-2] == batch and a.strides[1] < a.strides[2]:
        memory = np.empty((n_b, rows, n_h, width), a.dtype)  # (B, T, H, width)
        steps = (rows * n_h * width, width, n_h * width)
        return memory.transpose(0, 2, 1, 3), memory.reshape(-1), steps  # (B, H, T, width)
    out = np.empty((*batch, rows, width), a.dtype)
    return out, out.reshape(-1), (n_h * rows * width, rows * width, width)


def _tiles(bh: int, tq: int, tk: int, causal: bool):
    rows = max(1, min(tq, TILE_ELEMENTS // max(1, bh * tk)))
    if causal:  # each tile stops at its last query's last key: smaller tiles skip more
        rows = min(rows, CAUSAL_ROWS)
    for i0 in range(0, tq, rows):
        i1 = min(i0 + rows, tq)
        yield i0, i1, (min(i1, tk) if causal else tk)


def _batch_and_masks(q, k, v, mask, causal):
    """The broadcast leading dims, and the masks as the kernels take them (`_masks`)."""
    batch = q.shape[:-2]
    if not batch == k.shape[:-2] == v.shape[:-2]:  # equal is the rule: skip broadcast_shapes
        batch = np.broadcast_shapes(batch, k.shape[:-2], v.shape[:-2])
    return batch, _masks(mask, batch, q.shape[-2], k.shape[-2], q.dtype, causal)


def _setup(q, k, v, mask, causal):
    batch, masks = _batch_and_masks(q, k, v, mask, causal)
    q3, k3, v3 = (_as_batch(a, batch) for a in (q, k, v))
    return batch, q3, k3, v3, masks


@kernel("attention.forward", backend="numba", dtypes=FLOATS, when=big_enough)
def attention_forward(q, k, v, mask, causal, scale):
    if short(q, k, v):
        batch, masks = _batch_and_masks(q, k, v, mask, causal)
        tq, tk = q.shape[-2], k.shape[-2]
        buffers, steps = rows_of((q, k, v), batch)
        dims = (*_pairs(batch), tq, tk, q.shape[-1], v.shape[-1])
        y, y_flat, y_steps = empty_like_rows(q, batch, tq, v.shape[-1])
        lse = np.empty((*batch, tq), q.dtype)
        lse2 = lse.reshape(-1, tq)  # a view of lse
        steps = np.array([*steps, y_steps], np.int64)
        workers = min(numba.get_num_threads(), lse2.shape[0])
        pairs_forward(*buffers, steps, dims, *masks, q.dtype.type(scale), workers, y_flat, lse2)
        return y, lse
    batch, q3, k3, v3, masks = _setup(q, k, v, mask, causal)
    bh, tq, tk = q3.shape[0], q3.shape[1], k3.shape[1]
    scale = q.dtype.type(scale)
    y = np.empty((bh, tq, v3.shape[2]), q.dtype)
    lse = np.empty((bh, tq), q.dtype)
    k_t = k3.transpose(0, 2, 1)
    for i0, i1, kn in _tiles(bh, tq, tk, causal):
        s = q3[:, i0:i1] @ k_t[:, :, :kn]  # (BH, Bq, Kn): this tile's scores only
        _softmax_tile(s, i0, *masks, scale, lse)
        y[:, i0:i1] = s @ v3[:, :kn]
    return y.reshape(*batch, tq, -1), lse.reshape(*batch, tq)


@kernel("attention.backward", backend="numba", dtypes=FLOATS, when=big_enough_backward)
def attention_backward(gy, q, k, v, y, lse, mask, causal, scale):
    if short(q, k, v):
        batch, masks = _batch_and_masks(q, k, v, mask, causal)
        tq, tk = q.shape[-2], k.shape[-2]
        buffers, steps = rows_of((gy, q, k, v, y), batch)
        dims = (*_pairs(batch), tq, tk, q.shape[-1], v.shape[-1])
        lse2 = read_only(np.ascontiguousarray(lse).reshape(-1, tq))
        grads, flat, grad_steps = gradients_like(q, k, v, batch)
        steps = np.array([*steps, *grad_steps], np.int64)
        workers = min(numba.get_num_threads(), lse2.shape[0])
        args = (*buffers, steps, dims, lse2, *masks, q.dtype.type(scale), workers, *flat)
        pairs_backward(*args)
        return grads
    batch, q3, k3, v3, masks = _setup(q, k, v, mask, causal)
    bh, tq, tk = q3.shape[0], q3.shape[1], k3.shape[1]
    scale = q.dtype.type(scale)
    gy3 = read_only(np.ascontiguousarray(gy).reshape(bh, tq, -1))
    y3 = read_only(np.ascontiguousarray(y).reshape(bh, tq, -1))
    lse2 = read_only(np.ascontiguousarray(lse).reshape(bh, tq))
    gq = np.empty_like(q3)
    gk, gv = np.zeros_like(k3), np.zeros_like(v3)
    k_t, v_t = k3.transpose(0, 2, 1), v3.transpose(0, 2, 1)
    for i0, i1, kn in _tiles(bh, tq, tk, causal):
        s = q3[:, i0:i1] @ k_t[:, :, :kn]  # recomputed scores of this tile
        dp = gy3[:, i0:i1] @ v_t[:, :, :kn]  # dP = dY V^T
        _softmax_grad_tile(s, dp, gy3, y3, i0, *masks, scale, lse2)
        gq[:, i0:i1] = dp @ k3[:, :kn]  # dp now holds dS * scale, s holds P
        gk[:, :kn] += dp.transpose(0, 2, 1) @ q3[:, i0:i1]
        gv[:, :kn] += s.transpose(0, 2, 1) @ gy3[:, i0:i1]
    return (
        gq.reshape(*batch, tq, -1),
        gk.reshape(*batch, tk, -1),
        gv.reshape(*batch, tk, -1),
    )
