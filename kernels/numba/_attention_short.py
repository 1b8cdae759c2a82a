"""Attention for short key sequences (at most SHORT_KEYS): one thread per (batch, head) pair.

A thread copies its pair's Q, K^T and V into contiguous scratch, then walks the queries in
blocks of four rows. The inputs arrive as flat buffers with element strides (see `rows_of` in
attention.py): Numba compiles a row of a strided 4-D view as a strided loop that does not
vectorise (0.3 ns per element, a tenth of the backward), a slice of a flat buffer as a
contiguous one (0.06 ns). Every product is a loop whose inner index runs over contiguous memory
(keys for scores, features for outputs), so LLVM vectorises it and the operands stay in L1;
at the baby-GPT shapes that beats the 48 tiny BLAS calls per product that the tiled path and
the reference make. Four rows per pass means each row of K, V (or dK, dV) is loaded once per
four multiply-adds; the products also take four of its inner terms per pass, so each store
of an output row carries sixteen multiply-adds instead of four.

Forward, per block of rows i:  S_i = q_i K^T * scale + mask,  P_i = exp(S_i - max) / sum,
                               y_i = P_i V,  lse_i = max + log(sum).
Backward, per block:           P_i = exp(S_i - lse_i),  dP_i = dy_i V^T,
                               dS_i = P_i (dP_i - D_i) scale  with D_i = dy_i . y_i,
                               dq_i = dS_i K;  after all blocks, dK = dS^T Q and dV = P^T dY
                               (P and dS of every row kept in scratch).

The forward scales Q once as it is copied, so the scores come out scaled; the backward folds
the scale into its exp when there is no mask. Key loops run to `last`, a multiple of LANES past
the block's last visible key (scratch is padded with zeros; keys past the visible ones are
zeroed by a select): no scalar remainder loops. Scratch
is allocated once per thread, not per pair: at these sizes the allocations were a tenth of the
backward. The worker count is an argument (numba.get_num_threads() in the caller), so that the
kernels stay cacheable.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import row_max
from tinyformer.kernels.numba._rows import FASTMATH

LANES = 8  # key loops run to a multiple of this (16 wastes more on causal blocks)


@njit(fastmath=FASTMATH, cache=True)
def scale_and_mask(s, n, scale, keep_row, bias_row, has_keep, has_bias):
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
def exp_shifted(row, n, top):
    """In place on row[:n]: exp(row - top); returns their sum (the softmax denominator)."""
    total = row.dtype.type(0)
    for j in range(n):
        e = exp_nonpositive(row[j] - top)
        row[j] = e
        total += e
    return total


@njit(fastmath=FASTMATH, cache=True)
def exp_below(row, n, last, top):
    """In place on row[:last]: exp(row - top) for the visible keys j < n, 0 from n on; returns
    their sum. Running to `last` (a multiple of LANES) with a select leaves no scalar remainder
    loop: `exp_shifted`'s vector loop takes 32 keys at a time, so for a ViT's 17 keys all ran
    in its scalar remainder, and the forward took 9% longer."""
    zero = row.dtype.type(0)
    total = zero
    for j in range(last):
        e = exp_nonpositive(row[j] - top)
        e = e if j < n else zero
        row[j] = e
        total += e
    return total


@njit(fastmath=FASTMATH, cache=True)
def _offset(steps, which, b0, b1):
    """Where pair (b0, b1) of input `which` starts in its flat buffer."""
    return steps[which, 0] * b0 + steps[which, 1] * b1


@njit(fastmath=FASTMATH, cache=True)
def _copy(buf, start, step, rows, cols, dst, transpose, factor):
    """dst[:rows, :cols] = rows of buf (row i at start + i * step) * factor, or
    dst[:cols, :rows] = their transpose."""
    for i in range(rows):
        row = buf[start + i * step : start + i * step + cols]  # contiguous: vectorises
        if transpose:
            for t in range(cols):
                dst[t, i] = row[t]
        else:
            out = dst[i]
            for t in range(cols):
                out[t] = row[t] * factor


@njit(fastmath=FASTMATH, cache=True)
def _four_rows_times(a, i0, b, k, m, out, t0=0):
    """out[r, :m] = a[i0 + r, t0:k] @ b[t0:k, :m] for r < 4: one pass over b's rows for four
    rows of a, four rows of b at a time. (Scores: k = head size, m = keys to `last`; P V and
    dS K: k = keys to `last`; dK = dS^T Q and dV = P^T dY: a = dS^T or P^T, a transposed view,
    since a's elements are only read one at a time, and t0 = the first query that sees the keys.)"""
    a0, a1, a2, a3 = a[i0], a[i0 + 1], a[i0 + 2], a[i0 + 3]
    o0, o1, o2, o3 = out[0], out[1], out[2], out[3]
    zero = out.dtype.type(0)
    for j in range(m):
        o0[j] = o1[j] = o2[j] = o3[j] = zero
    quads = t0 + (k - t0) // 4 * 4
    for t in range(t0, quads, 4):
        b0, b1, b2, b3 = b[t], b[t + 1], b[t + 2], b[t + 3]
        c00, c01, c02, c03 = a0[t], a0[t + 1], a0[t + 2], a0[t + 3]
        c10, c11, c12, c13 = a1[t], a1[t + 1], a1[t + 2], a1[t + 3]
        c20, c21, c22, c23 = a2[t], a2[t + 1], a2[t + 2], a2[t + 3]
        c30, c31, c32, c33 = a3[t], a3[t + 1], a3[t + 2], a3[t + 3]
        for j in range(m):
            x0, x1, x2, x3 = b0[j], b1[j], b2[j], b3[j]
            o0[j] += c00 * x0 + c01 * x1 + c02 * x2 + c03 * x3
            o1[j] += c10 * x0 + c11 * x1 + c12 * x2 + c13 * x3
            o2[j] += c20 * x0 + c21 * x1 + c22 * x2 + c23 * x3
            o3[j] += c30 * x0 + c31 * x1 + c32 * x2 + c33 * x3
    for t in range(quads, k):  # the last (k - t0) % 4 terms (e.g. head sizes not a multiple of 4)
        c0, c1, c2, c3, b_row = a0[t], a1[t], a2[t], a3[t], b[t]
        for j in range(m):
            x = b_row[j]
            o0[j] += c0 * x
            o1[j] += c1 * x
            o2[j] += c2 * x
            o3[j] += c3 * x


@njit(fastmath=FASTMATH, cache=True)
def _block_softmax(s, b, i0, tq, tk, keep, bias, ids, flags, lse, inv, last):
    """Rows s[r] = scaled scores of query i0 + r -> exp(s + mask - max), zero past the visible
    keys; fills lse[b, i] and inv[r] = 1 / sum (0 for a padding row or a fully masked one)."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    zero, one = s.dtype.type(0), s.dtype.type(1)
    for r in range(4):
        i, row = i0 + r, s[r]
        inv[r] = zero
        n = 0 if i >= tq else (min(i + 1, tk) if causal else tk)
        if n:
            if has_keep or has_bias:
                keep_row, bias_row = keep[ids[0, b], i], bias[ids[1, b], i]
                scale_and_mask(row, n, one, keep_row, bias_row, has_keep, has_bias)
            top = row_max(row, n)
            if top == -np.inf:  # every key masked: weights 0, output 0, lse +inf
                lse[b, i] = np.inf
            else:
                if n < 32:  # all of exp_shifted's loop would be its scalar remainder
                    total = exp_below(row, n, last, top)
                else:  # its vector loop, without exp_below's select (5-8% faster at 256 keys)
                    total = exp_shifted(row, n, top)
                    row[n:last] = zero
                inv[r] = one / total
                lse[b, i] = top + np.log(total)
                continue
        row[:last] = zero  # a padding row or a fully masked one


@njit(fastmath=FASTMATH, cache=True)
def _softmax_grad_row(p, ds, i, n, last, gys, y, y_at, lse_i, factor, scale):
    """In place over keys to `last` of row i: p[i] <- P = exp(s * factor - lse), ds[i] <- dS =
    P (dP - D) scale with D = dy . y (y's row starts at y_at); both 0 from key n on (not
    visible). Running to `last` with a select, not to n, leaves no scalar remainder loop.
    Indices, not row views: here the views' reference counting cost ~30 ns a row, a third of
    the function."""
    zero = p.dtype.type(0)
    big_d = zero
    for t in range(gys.shape[1]):
        big_d += gys[i, t] * y[y_at + t]
    for j in range(last):
        e = exp_nonpositive(p[i, j] * factor - lse_i)
        e = e if j < n else zero
        p[i, j] = e
        ds[i, j] = e * (ds[i, j] - big_d) * scale


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def pairs_forward(q, k, v, steps, dims, keep, bias, ids, flags, scale, workers, y, lse):
    """q, k, v and the output y: flat buffers, steps[n] the element strides (batch, head, row)
    of q, k, v, y; dims = (B, H, Tq, Tk, d, dv). y and lse (BH, Tq) are filled."""
    causal = flags[2]
    n0, n1, tq, tk, d, dv = dims
    tkp = (tk + LANES - 1) // LANES * LANES
    pairs = n0 * n1
    one = y.dtype.type(1)
    for w in prange(workers):
        qs = np.zeros(((tq + 3) // 4 * 4, d), y.dtype)  # padding rows stay 0
        kt, vs = np.zeros((d, tkp), y.dtype), np.zeros((tkp, dv), y.dtype)
        s, out, inv = np.empty((4, tkp), y.dtype), np.empty((4, dv), y.dtype), np.empty(4, y.dtype)
        for b in range(w * pairs // workers, (w + 1) * pairs // workers):
            b0, b1 = b // n1, b % n1
            _copy(q, _offset(steps, 0, b0, b1), steps[0, 2], tq, d, qs, False, scale)  # once
            _copy(k, _offset(steps, 1, b0, b1), steps[1, 2], tk, d, kt, True, one)
            _copy(v, _offset(steps, 2, b0, b1), steps[2, 2], tk, dv, vs, False, one)
            for i0 in range(0, tq, 4):
                last = min((i0 + 4 + LANES - 1) // LANES * LANES, tkp) if causal else tkp
                _four_rows_times(qs, i0, kt, d, last, s)  # S = Q_block K^T
                _block_softmax(s, b, i0, tq, tk, keep, bias, ids, flags, lse, inv, last)
                _four_rows_times(s, 0, vs, last, dv, out)  # Y_block * sum = exp(S - max) V
                for r in range(min(4, tq - i0)):
                    at = _offset(steps, 3, b0, b1) + (i0 + r) * steps[3, 2]
                    # Through a view of the row: writing `y[at + t]` took ~10% longer over the
                    # backward's three outputs (measured; the index at + t is not provably
                    # non-negative, so Numba wraps it element by element).
                    row = y[at : at + dv]
                    for t in range(dv):
                        row[t] = out[r, t] * inv[r]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def pairs_backward(
    gy, q, k, v, y, steps, dims, lse, keep, bias, ids, flags, scale, workers, gq, gk, gv
):
    """gy, q, k, v, y and the outputs gq, gk, gv: flat buffers, steps[n] the element strides
    (batch, head, row) of the n-th in that order; dims = (B, H, Tq, Tk, d, dv); lse (BH, Tq)."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    n0, n1, tq, tk, d, dv = dims
    zero, one = gq.dtype.type(0), gq.dtype.type(1)
    padded = (tq + 3) // 4 * 4
    tkp = (tk + LANES - 1) // LANES * LANES
    pairs = n0 * n1
    for w in prange(workers):
        qs, gys = np.zeros((padded, d), gq.dtype), np.zeros((padded, dv), gq.dtype)
        ks, kt, vt = (
            np.zeros((tkp, d), gq.dtype),
            np.zeros((d, tkp), gq.dtype),
            np.zeros((dv, tkp), gq.dtype),
        )
        # P and dS of every query row, kept for dK and dV after the row blocks
        p, ds = np.empty((padded, tkp), gq.dtype), np.empty((padded, tkp), gq.dtype)
        g_b = np.empty((4, max(d, dv)), gq.dtype)
        for b in range(w * pairs // workers, (w + 1) * pairs // workers):
            b0, b1 = b // n1, b % n1
            at_k, at_y = _offset(steps, 2, b0, b1), _offset(steps, 4, b0, b1)
            _copy(gy, _offset(steps, 0, b0, b1), steps[0, 2], tq, dv, gys, False, one)
            _copy(q, _offset(steps, 1, b0, b1), steps[1, 2], tq, d, qs, False, one)
            _copy(k, at_k, steps[2, 2], tk, d, ks, False, one)
            _copy(k, at_k, steps[2, 2], tk, d, kt, True, one)
            _copy(v, _offset(steps, 3, b0, b1), steps[3, 2], tk, dv, vt, True, one)
            for i0 in range(0, tq, 4):
                last = min((i0 + 4 + LANES - 1) // LANES * LANES, tkp) if causal else tkp
                p_i, ds_i = p[i0 : i0 + 4], ds[i0 : i0 + 4]
                _four_rows_times(qs, i0, kt, d, last, p_i)  # S = Q_block K^T
                _four_rows_times(gys, i0, vt, dv, last, ds_i)  # dP = dY_block V^T
                for i in range(i0, i0 + 4):
                    n = 0 if i >= tq else (min(i + 1, tk) if causal else tk)
                    if n == 0:  # a padding row
                        p[i, :last] = zero
                        ds[i, :last] = zero
                    else:
                        factor = scale  # without a mask, scaling rides along in the exp
                        if has_keep or has_bias:
                            keep_row, bias_row = keep[ids[0, b], i], bias[ids[1, b], i]
                            scale_and_mask(p[i], n, scale, keep_row, bias_row, has_keep, has_bias)
                            factor = one
                        y_at = at_y + i * steps[4, 2]
                        _softmax_grad_row(p, ds, i, n, last, gys, y, y_at, lse[b, i], factor, scale)
                _four_rows_times(ds_i, 0, ks, last, d, g_b)  # dQ_block = dS K
                for r in range(min(4, tq - i0)):
                    at = _offset(steps, 5, b0, b1) + (i0 + r) * steps[5, 2]
                    row = gq[at : at + d]
                    for t in range(d):
                        row[t] = g_b[r, t]
            # dK and dV four keys at a time. Causal: query i sees keys up to i, so keys j0.. get
            # gradient only from queries j0..; those rows of P and dS were filled past j0 + 3.
            for j0 in range(0, tk, 4):
                first = min(j0, tq) if causal else 0
                _four_rows_times(ds.T, j0, qs, tq, d, g_b, first)  # dK_block = dS^T Q
                for r in range(min(4, tk - j0)):
                    at = _offset(steps, 6, b0, b1) + (j0 + r) * steps[6, 2]
                    row = gk[at : at + d]
                    for t in range(d):
                        row[t] = g_b[r, t]
                _four_rows_times(p.T, j0, gys, tq, dv, g_b, first)  # dV_block = P^T dY
                for r in range(min(4, tk - j0)):
                    at = _offset(steps, 7, b0, b1) + (j0 + r) * steps[7, 2]
                    row = gv[at : at + dv]
                    for t in range(dv):
                        row[t] = g_b[r, t]
