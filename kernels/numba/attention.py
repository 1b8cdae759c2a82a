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
key their last query may see. Leading dims broadcast; a broadcast mask is never copied (an index
array maps each (batch, head) pair to its mask slice).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS
from tinyformer.registry import kernel

TILE_ELEMENTS = 1 << 20  # scores held at once: 4 MiB in float32
LANES = 16  # product loops over keys run to a multiple of this: no scalar remainder
SHORT_KEYS = 256  # up to this many keys, one thread per (batch, head) pair (_pairs_*)
MIN_SCORES = 1 << 17  # below this the fixed costs lose to the reference (docs/kernels.md)


def big_enough(q, k, *args) -> bool:
    """there are at least 2**17 scores (batch x heads x Tq x Tk)"""
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    return math.prod(batch) * q.shape[-2] * k.shape[-2] >= MIN_SCORES


def big_enough_backward(gy, q, k, *args) -> bool:
    """there are at least 2**17 scores (batch x heads x Tq x Tk)"""
    return big_enough(q, k)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _softmax_tile(s, row0, keep, bias, ids, flags, scale, lse):
    """In place: raw scores s (BH, Bq, Kn) of query rows row0.. -> weights; fills lse rows."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, bq, kn = s.shape
    zero, neg_inf = s.dtype.type(0), s.dtype.type(-np.inf)
    for item in prange(bh * bq):
        b, r = item // bq, item % bq
        i = row0 + r
        row, keep_row, bias_row = s[b, r], keep[ids[0, b], i], bias[ids[1, b], i]
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
        total = _exp_shifted(row, n, top)
        inv = s.dtype.type(1) / total
        for j in range(n):
            row[j] *= inv
        lse[b, i] = top + np.log(total)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _softmax_grad_tile(s, dp, gy, y, row0, keep, bias, ids, flags, scale, lse):
    """In place: raw scores s -> P = exp(s * scale + mask - lse); dp = dY V^T -> dS * scale."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, bq, kn = s.shape
    zero, neg_inf = s.dtype.type(0), s.dtype.type(-np.inf)
    for item in prange(bh * bq):
        b, r = item // bq, item % bq
        i = row0 + r
        row, dp_row, gy_row, y_row = s[b, r], dp[b, r], gy[b, i], y[b, i]
        keep_row, bias_row = keep[ids[0, b], i], bias[ids[1, b], i]
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


@njit(fastmath=FASTMATH, cache=True)
def _scale_and_mask(s, n, scale, keep_row, bias_row, has_keep, has_bias):
    """In place on s[:n]: s * scale (+ bias), -inf where keep is False. The flags are tested
    outside the loops so that each loop is branch-free and vectorises."""
    if has_bias:
        for j in range(n):
            s[j] = s[j] * scale + bias_row[j]
    else:
        for j in range(n):
            s[j] *= scale
    if has_keep:
        neg_inf = s.dtype.type(-np.inf)
        for j in range(n):
            s[j] = s[j] if keep_row[j] else neg_inf


@njit(fastmath=FASTMATH, cache=True)
def _exp_shifted(row, n, top):
    """In place on row[:n]: exp(row - top); returns their sum (the softmax denominator)."""
    total = row.dtype.type(0)
    for j in range(n):
        e = exp_nonpositive(row[j] - top)
        row[j] = e
        total += e
    return total


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _pairs_forward(q, k, v, keep, bias, ids, flags, scale, y, lse):
    """Short sequences: one thread per (batch, head) pair does the whole attention for it, with
    the pair's Q, K^T and V copied into contiguous scratch and one row of scores at a time.

    Every product is a loop whose inner index runs over contiguous memory (keys for scores,
    features for outputs), so LLVM vectorises it and the operands stay in L1; that beats 48
    tiny BLAS calls per product at the baby-GPT shapes.
    """
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    n0, n1, tq, d = q.shape  # (B, H, T, d) views, strided as the caller's arrays are
    tk, dv = k.shape[2], v.shape[3]
    zero, neg_inf = y.dtype.type(0), y.dtype.type(-np.inf)
    for b in prange(n0 * n1):
        qb, kb = q[b // n1, b % n1], k[b // n1, b % n1]
        qs, kt, vs = (
            np.empty((tq, d), y.dtype),
            np.empty((d, tk), y.dtype),
            v[b // n1, b % n1].copy(),
        )
        for i in range(tq):
            for t in range(d):
                qs[i, t] = qb[i, t]
        for j in range(tk):
            for t in range(d):
                kt[t, j] = kb[j, t]
        s, acc = np.empty(tk, y.dtype), np.empty(dv, y.dtype)
        for i in range(tq):
            keep_row, bias_row = keep[ids[0, b], i], bias[ids[1, b], i]
            n = min(i + 1, tk) if causal else tk
            s[:n] = zero
            for t in range(d):
                qv, k_row = qs[i, t], kt[t]
                for j in range(n):
                    s[j] += qv * k_row[j]
            _scale_and_mask(s, n, scale, keep_row, bias_row, has_keep, has_bias)
            top = row_max(s, n) if n else neg_inf
            acc[:] = zero
            if top == neg_inf:  # every key masked: output 0, lse +inf
                y[b, i] = acc
                lse[b, i] = np.inf
                continue
            total = _exp_shifted(s, n, top)
            for j in range(n):
                p, v_row = s[j], vs[j]
                for t in range(dv):
                    acc[t] += p * v_row[t]
            inv = y.dtype.type(1) / total
            for t in range(dv):
                y[b, i, t] = acc[t] * inv
            lse[b, i] = top + np.log(total)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _pairs_backward(gy, q, k, v, y, lse, keep, bias, ids, flags, scale, gq, gk, gv):
    """Short sequences, backward: per (batch, head) pair and query row i, recompute
    P_i = exp(q_i K^T scale + mask - lse_i), dP_i = dy_i V^T, dS_i = P_i (dP_i - D_i) scale, then
    dq_i = dS_i K, dK += dS_i^T q_i, dV += P_i^T dy_i. One thread owns a pair: no races.

    Query rows go four at a time into dK and dV, so each row of dK and dV is loaded and stored
    once per four rank-1 updates instead of once per update (the loop is bound by that traffic).
    Rows past the end (or keys past a causal row's last one) carry P = dS = 0.
    """
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    n0, n1, tq, d = q.shape  # (B, H, T, d) views, strided as the caller's arrays are
    tk, dv = k.shape[2], v.shape[3]
    zero = y.dtype.type(0)
    padded = (tq + 3) // 4 * 4
    tkp = (tk + LANES - 1) // LANES * LANES
    for b in prange(n0 * n1):
        b0, b1 = b // n1, b % n1
        qb, vb, gyb, yb = q[b0, b1], v[b0, b1], gy[b0, b1], y[b0, b1]
        kt, vt = np.zeros((d, tkp), y.dtype), np.zeros((dv, tkp), y.dtype)
        ks = k[b0, b1].copy()
        qs, gys = np.zeros((padded, d), y.dtype), np.zeros((padded, dv), y.dtype)
        for i in range(tq):  # explicit loops: Numba's n-d slice assignment is slow
            for t in range(d):
                qs[i, t] = qb[i, t]
            for t in range(dv):
                gys[i, t] = gyb[i, t]
        for j in range(tk):
            for t in range(d):
                kt[t, j] = ks[j, t]
            for t in range(dv):
                vt[t, j] = vb[j, t]
        gk_b, gv_b = np.zeros((tkp, d), y.dtype), np.zeros((tkp, dv), y.dtype)
        ps, dss = np.zeros((4, tkp), y.dtype), np.zeros((4, tkp), y.dtype)
        acc = np.empty(d, y.dtype)
        for i0 in range(0, tq, 4):
            last = min((i0 + 4 + LANES - 1) // LANES * LANES, tkp) if causal else tkp
            q0, q1, q2, q3 = qs[i0], qs[i0 + 1], qs[i0 + 2], qs[i0 + 3]
            g0, g1, g2, g3 = gys[i0], gys[i0 + 1], gys[i0 + 2], gys[i0 + 3]
            s0, s1, s2, s3 = ps[0], ps[1], ps[2], ps[3]
            e0, e1, e2, e3 = dss[0], dss[1], dss[2], dss[3]
            for j in range(last):
                s0[j] = s1[j] = s2[j] = s3[j] = zero
                e0[j] = e1[j] = e2[j] = e3[j] = zero
            for t in range(d):  # S = Q_block K^T, four rows per pass over K
                a0, a1, a2, a3, k_row = q0[t], q1[t], q2[t], q3[t], kt[t]
                for j in range(last):
                    kv = k_row[j]
                    s0[j] += a0 * kv
                    s1[j] += a1 * kv
                    s2[j] += a2 * kv
                    s3[j] += a3 * kv
            for t in range(dv):  # dP = dY_block V^T
                a0, a1, a2, a3, v_row = g0[t], g1[t], g2[t], g3[t], vt[t]
                for j in range(last):
                    vv = v_row[j]
                    e0[j] += a0 * vv
                    e1[j] += a1 * vv
                    e2[j] += a2 * vv
                    e3[j] += a3 * vv
            for r in range(4):
                i = i0 + r
                s, dp = ps[r], dss[r]
                if i >= tq:  # padding row: P = dS = 0
                    s[:last] = zero
                    dp[:last] = zero
                    continue
                keep_row, bias_row = keep[ids[0, b], i], bias[ids[1, b], i]
                n = min(i + 1, tk) if causal else tk
                gy_row, y_row = gys[i], yb[i]
                big_d = zero  # D_i = dy_i . y_i
                for t in range(dv):
                    big_d += gy_row[t] * y_row[t]
                lse_i = lse[b, i]
                _scale_and_mask(s, n, scale, keep_row, bias_row, has_keep, has_bias)
                for j in range(n):
                    p = exp_nonpositive(s[j] - lse_i)
                    s[j] = p
                    dp[j] = p * (dp[j] - big_d) * scale
                s[n:last] = zero
                dp[n:last] = zero
            for r in range(4):  # dQ_block = dS K
                i = i0 + r
                if i >= tq:
                    continue
                dp = dss[r]
                acc[:] = zero
                for j in range(min(last, tk)):
                    ds, k_row = dp[j], ks[j]
                    for t in range(d):
                        acc[t] += ds * k_row[t]
                for t in range(d):
                    gq[b, i, t] = acc[t]
            for j in range(last):  # dK += dS^T Q_block, dV += P^T dY_block
                d0, d1, d2, d3 = e0[j], e1[j], e2[j], e3[j]
                p0, p1, p2, p3 = s0[j], s1[j], s2[j], s3[j]
                gk_row, gv_row = gk_b[j], gv_b[j]
                for t in range(d):
                    gk_row[t] += d0 * q0[t] + d1 * q1[t] + d2 * q2[t] + d3 * q3[t]
                for t in range(dv):
                    gv_row[t] += p0 * g0[t] + p1 * g1[t] + p2 * g2[t] + p3 * g3[t]
        for j in range(tk):
            for t in range(d):
                gk[b, j, t] = gk_b[j, t]
            for t in range(dv):
                gv[b, j, t] = gv_b[j, t]


def _flatten(a: np.ndarray, batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """a (..., X, Y) as (M, X, Y) over its own leading dims, and for each of the prod(batch)
    broadcast batch entries the index of its slice."""
    lead = a.shape[:-2]
    flat = a.reshape(-1, *a.shape[-2:])  # keeps zero strides of broadcast trailing dims
    index = np.arange(flat.shape[0]).reshape((1,) * (len(batch) - len(lead)) + lead)
    return flat, np.broadcast_to(index, batch).reshape(-1)


def _masks(mask, batch, tq, tk, dtype, causal):
    """(keep, bias, ids, flags): unused masks are a (1, 1, 1) dummy read at slice 0."""
    keep, bias = np.ones((1, 1, 1), np.bool_), np.zeros((1, 1, 1), dtype)
    bh = math.prod(batch)
    keep_i = bias_i = np.zeros(bh, np.int64)
    if mask is not None:
        mask3, mask_i = _flatten(np.broadcast_to(mask, (*mask.shape[:-2], tq, tk)), batch)
        if mask.dtype == np.bool_:
            keep, keep_i = mask3, mask_i
        else:
            bias, bias_i = mask3, mask_i
    ids = np.stack([keep_i, bias_i]).astype(np.int64)
    is_bool = mask is not None and mask.dtype == np.bool_
    flags = np.array([is_bool, mask is not None and not is_bool, causal])
    return keep, bias, ids, flags


def _as_batch(a: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """(..., T, d) broadcast to the full batch, as (BH, T, d) (copied only if broadcast)."""
    return np.broadcast_to(a, (*batch, *a.shape[-2:])).reshape(-1, *a.shape[-2:])


def _as_pairs(a: np.ndarray, batch: tuple[int, ...]) -> np.ndarray:
    """(..., T, d) broadcast to the full batch, as a (B, H, T, d) view: for the usual 4-D input
    (a transposed (B, T, H, d) projection, say) no copy is made; the kernels read it strided."""
    full = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    if len(batch) <= 2:
        return full.reshape((1,) * (2 - len(batch)) + full.shape)
    return full.reshape(-1, batch[-1], *a.shape[-2:])  # more leading dims: merged (maybe copied)


def _tiles(bh: int, tq: int, tk: int, causal: bool):
    rows = max(1, min(tq, TILE_ELEMENTS // max(1, bh * tk)))
    for i0 in range(0, tq, rows):
        i1 = min(i0 + rows, tq)
        yield i0, i1, (min(i1, tk) if causal else tk)


def _setup(q, k, v, mask, causal):
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    tq, tk = q.shape[-2], k.shape[-2]
    masks = _masks(mask, batch, tq, tk, q.dtype, causal)
    q3, k3, v3 = (_as_batch(a, batch) for a in (q, k, v))
    return batch, q3, k3, v3, masks


@kernel("attention.forward", backend="numba", dtypes=FLOATS, when=big_enough)
def attention_forward(q, k, v, mask, causal, scale):
    if k.shape[-2] <= SHORT_KEYS:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        tq, tk = q.shape[-2], k.shape[-2]
        masks = _masks(mask, batch, tq, tk, q.dtype, causal)
        q4, k4, v4 = (_as_pairs(a, batch) for a in (q, k, v))
        y = np.empty((*batch, tq, v.shape[-1]), q.dtype)
        lse = np.empty((*batch, tq), q.dtype)
        y3, lse2 = y.reshape(-1, tq, v.shape[-1]), lse.reshape(-1, tq)  # views of y and lse
        _pairs_forward(q4, k4, v4, *masks, q.dtype.type(scale), y3, lse2)
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
    if k.shape[-2] <= SHORT_KEYS:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        tq, tk = q.shape[-2], k.shape[-2]
        masks = _masks(mask, batch, tq, tk, q.dtype, causal)
        q4, k4, v4, gy4, y4 = (_as_pairs(a, batch) for a in (q, k, v, gy, y))
        lse2 = np.ascontiguousarray(lse).reshape(-1, tq)
        grads = [np.empty((*batch, a.shape[-2], a.shape[-1]), q.dtype) for a in (q, k, v)]
        flat = [g.reshape(-1, *g.shape[-2:]) for g in grads]  # views of the gradients
        _pairs_backward(gy4, q4, k4, v4, y4, lse2, *masks, q.dtype.type(scale), *flat)
        return tuple(grads)
    batch, q3, k3, v3, masks = _setup(q, k, v, mask, causal)
    bh, tq, tk = q3.shape[0], q3.shape[1], k3.shape[1]
    scale = q.dtype.type(scale)
    gy3 = np.ascontiguousarray(gy).reshape(bh, tq, -1)
    y3 = np.ascontiguousarray(y).reshape(bh, tq, -1)
    lse2 = np.ascontiguousarray(lse).reshape(bh, tq)
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
