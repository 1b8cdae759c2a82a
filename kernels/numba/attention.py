"""Numba kernels for fused scaled-dot-product attention, in the flash-attention manner.

The (Tq, Tk) score matrix is never stored. Work is split into query rows; a thread computes one
row's scores into its own buffer of length Tk, turns them into weights and accumulates the
output, then moves on. Memory is linear in T: per thread one (Tk,) buffer, plus the outputs.

- forward saves only the output y and one log-sum-exp per query row (lse);
- backward recomputes each row's scores, p = exp(s - lse), and from them
  dq (the row's own), and dk, dv (summed over rows). Rows of different threads meet in dk and dv,
  so each thread adds into its own slot of a (threads, ...) buffer, summed at the end: no two
  threads write the same memory, and the result does not depend on scheduling.

Causal attention skips the keys after each query outright (about half the work). Rows are dealt
to threads round-robin, so causal rows of every length are spread evenly.

Leading (batch, head) dims may broadcast between q, k, v and the mask: each is flattened over its
own leading dims, and an index array maps every flattened batch entry to its slice, so nothing
broadcast is ever copied.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange
from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS

from tinyformer.registry import kernel


@njit(fastmath=FASTMATH, cache=True)
def _row_scores(q_row, k_t, keep_row, bias_row, has_keep, has_bias, n, scale, out):
    """out[:n] = scores of one query against keys 0..n-1 (masked: -inf); returns their max.

    k_t is K transposed, (d, Tk): each step adds q[t] * k_t[t, :n] to all n scores at once, a
    loop over contiguous keys that vectorises, instead of n dot products that each end in a
    horizontal sum.
    """
    neg_inf = q_row.dtype.type(-np.inf)  # a bare -np.inf would make the loops float64
    for j in range(n):
        out[j] = 0
    for t in range(k_t.shape[0]):
        qt, kt = q_row[t], k_t[t]
        for j in range(n):
            out[j] += qt * kt[j]
    top = neg_inf
    for j in range(n):
        s = out[j] * scale
        if has_bias:
            s += bias_row[j]
        if has_keep and not keep_row[j]:
            s = neg_inf
        out[j] = s
        top = max(top, s)
    return top


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(q, k_t, v, ids, keep, bias, flags, scale, y, lse, buffers):
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, tq = lse.shape
    tk = k_t.shape[2]
    chunks = buffers.shape[0]
    for c in prange(chunks):
        s = buffers[c, 0]
        for row in range(c, bh * tq, chunks):
            b, i = row // tq, row % tq
            n = min(i + 1, tk) if causal else tk
            keep_row, bias_row = keep[ids[3, b], i], bias[ids[4, b], i]
            top = _row_scores(
                q[ids[0, b], i], k_t[ids[1, b]], keep_row, bias_row, has_keep, has_bias, n, scale, s
            )
            y_row, vb = y[b, i], v[ids[2, b]]
            y_row[:] = 0
            if top == -np.inf:  # every key masked: output 0, and exp(s - inf) = 0 in backward
                lse[b, i] = np.inf
                continue
            total = y.dtype.type(0)
            for j in range(n):
                e = exp_nonpositive(s[j] - top)
                s[j] = e
                total += e
            inv = y.dtype.type(1) / total
            for j in range(n):
                p, v_row = s[j] * inv, vb[j]
                for t in range(y_row.size):
                    y_row[t] += p * v_row[t]
            lse[b, i] = top + np.log(total)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, q, k, k_t, v_t, y, lse, ids, keep, bias, flags, scale, grads, buffers):
    gq, gk_parts, gv_parts = grads
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    bh, tq = lse.shape
    tk = k_t.shape[2]
    chunks = buffers.shape[0]
    for c in prange(chunks):
        s, dp = buffers[c, 0], buffers[c, 1]
        for row in range(c, bh * tq, chunks):
            b, i = row // tq, row % tq
            n = min(i + 1, tk) if causal else tk
            q_row, gy_row, lse_i = q[ids[0, b], i], gy[b, i], lse[b, i]
            keep_row, bias_row = keep[ids[3, b], i], bias[ids[4, b], i]
            _row_scores(q_row, k_t[ids[1, b]], keep_row, bias_row, has_keep, has_bias, n, scale, s)
            big_d = y.dtype.type(0)  # D_i = gy_i . y_i = sum_j p_ij (gy_i . v_j)
            for t in range(gy_row.size):
                big_d += gy_row[t] * y[b, i, t]
            vb_t = v_t[ids[2, b]]
            for j in range(n):
                dp[j] = 0
            for t in range(vb_t.shape[0]):  # dp_j = gy_i . v_j, vectorised over keys
                g, vt = gy_row[t], vb_t[t]
                for j in range(n):
                    dp[j] += g * vt[j]
            for j in range(n):
                p = exp_nonpositive(s[j] - lse_i)
                s[j] = p
                dp[j] = p * (dp[j] - big_d) * scale  # now ds_ij * scale
            gq_row, kb = gq[b, i], k[ids[1, b]]
            for j in range(n):
                ds, p, k_row = dp[j], s[j], kb[j]
                gk_row, gv_row = gk_parts[c, b, j], gv_parts[c, b, j]
                for t in range(k_row.size):
                    gq_row[t] += ds * k_row[t]
                    gk_row[t] += ds * q_row[t]
                for t in range(gy_row.size):
                    gv_row[t] += p * gy_row[t]


def _flatten(a: np.ndarray, batch: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """a (..., X, Y) as (M, X, Y) over its own leading dims, and for each of the prod(batch)
    broadcast batch entries the index of its slice."""
    lead = a.shape[:-2]
    flat = a.reshape(-1, *a.shape[-2:])  # keeps zero strides of broadcast trailing dims
    index = np.arange(flat.shape[0]).reshape((1,) * (len(batch) - len(lead)) + lead)
    return flat, np.broadcast_to(index, batch).reshape(-1)


def _prepare(q, k, v, mask, causal, scale):
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    tq, tk = q.shape[-2], k.shape[-2]
    dtype = q.dtype
    q3, qi = _flatten(np.ascontiguousarray(q), batch)
    k3, ki = _flatten(np.ascontiguousarray(k), batch)
    v3, vi = _flatten(np.ascontiguousarray(v), batch)
    # Unused masks are a (1, 1, 1) dummy, read at slice 0 (Numba does not check bounds).
    keep, bias = np.ones((1, 1, 1), np.bool_), np.zeros((1, 1, 1), dtype)
    keep_i = bias_i = np.zeros(qi.size, np.int64)
    if mask is not None:
        mask3, mask_i = _flatten(np.broadcast_to(mask, (*mask.shape[:-2], tq, tk)), batch)
        if mask.dtype == np.bool_:
            keep, keep_i = mask3, mask_i
        else:
            bias, bias_i = mask3, mask_i
    ids = np.stack([qi, ki, vi, keep_i, bias_i]).astype(np.int64)
    has_mask = mask is not None
    flags = np.array(
        [has_mask and mask.dtype == np.bool_, has_mask and mask.dtype != np.bool_, causal]
    )
    return batch, q3, k3, v3, ids, keep, bias, flags, dtype.type(scale)


def _transposed(a3: np.ndarray) -> np.ndarray:
    """(M, T, d) -> contiguous (M, d, T): linear extra memory, for the vectorised score loops."""
    return np.ascontiguousarray(a3.transpose(0, 2, 1))


def _buffers(tk: int, dtype) -> np.ndarray:
    """Per thread, two rows of length Tk (scores and their gradients): linear in T."""
    return np.empty((numba.get_num_threads(), 2, max(tk, 1)), dtype)


@kernel("attention.forward", backend="numba", dtypes=FLOATS)
def attention_forward(q, k, v, mask, causal, scale):
    batch, q3, k3, v3, ids, keep, bias, flags, scale = _prepare(q, k, v, mask, causal, scale)
    bh, tq, tk = math.prod(batch), q.shape[-2], k.shape[-2]
    y = np.empty((bh, tq, v.shape[-1]), q.dtype)
    lse = np.empty((bh, tq), q.dtype)
    _forward(q3, _transposed(k3), v3, ids, keep, bias, flags, scale, y, lse, _buffers(tk, q.dtype))
    return y.reshape(*batch, tq, v.shape[-1]), lse.reshape(*batch, tq)


@kernel("attention.backward", backend="numba", dtypes=FLOATS)
def attention_backward(gy, q, k, v, y, lse, mask, causal, scale):
    batch, q3, k3, v3, ids, keep, bias, flags, scale = _prepare(q, k, v, mask, causal, scale)
    bh, tq, tk = math.prod(batch), q.shape[-2], k.shape[-2]
    chunks = numba.get_num_threads()
    gq = np.zeros((bh, tq, q.shape[-1]), q.dtype)
    gk_parts = np.zeros((chunks, bh, tk, k.shape[-1]), q.dtype)
    gv_parts = np.zeros((chunks, bh, tk, v.shape[-1]), q.dtype)
    _backward(
        np.ascontiguousarray(gy).reshape(bh, tq, -1),
        q3, k3, _transposed(k3), _transposed(v3),
        np.ascontiguousarray(y).reshape(bh, tq, -1),
        np.ascontiguousarray(lse).reshape(bh, tq),
        ids, keep, bias, flags, scale, (gq, gk_parts, gv_parts), _buffers(tk, q.dtype),
    )  # fmt: skip
    gk, gv = gk_parts.sum(axis=0), gv_parts.sum(axis=0)
    return (
        gq.reshape(*batch, tq, -1),
        gk.reshape(*batch, tk, -1),
        gv.reshape(*batch, tk, -1),
    )
