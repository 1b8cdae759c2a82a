"""Attention for short key sequences (at most SHORT_KEYS keys, heads of at most SHORT_HEAD
features): y = softmax(q k^T * scale + mask) v and its gradient, one (batch, head) pair per
thread, everything of a pair in that thread's L1.

Mapping: Numba's workers claim pairs one at a time (_tasks.py: a worker on a slower core takes
fewer); a pair is never split. A thread copies its pair's Q (scaled as it is copied, so the
scores come out scaled), K^T and V into contiguous scratch, K^T and V^T 8 x 8 at a time through
vector registers (_transpose.py), and walks the queries in blocks of four rows. The worker
count is an argument (numba.get_num_threads() in the caller), so that the kernels stay
cacheable.

Forward, per block of rows i:  S_i = q_i K^T * scale + mask,  P_i = exp(S_i - max) / sum,
                               y_i = P_i V,  lse_i = max + log(sum).
Backward, per block:           P_i = exp(S_i - lse_i),  dP_i = dy_i V^T,
                               dS_i = P_i (dP_i - D_i) scale  with D_i = dy_i . y_i,
                               dq_i = dS_i K;  after all blocks, dK = dS^T Q and dV = P^T dY,
                               four keys at a time (P and dS of every row kept in scratch).
The forward's softmax takes a block's four rows through each step together (`four_row_maxima`,
`_four_exps`); the backward folds the scale into its exp when there is no mask.

Products: register tiles (_tile.py), four output rows of 8, 16 or 32 columns whose
accumulators stay in vector registers for the whole sum, the operands in L1; the backward
writes four rows of dQ, dK or dV straight from the registers into the gradient (only a last
block of fewer rows goes through scratch).

Memory: the inputs arrive as flat buffers with element strides (`rows_of` in attention.py),
so that a row is a contiguous slice. Scratch is allocated once per thread, not per pair, and
is flat: rows of features FEATURE_ROW apart, rows of keys KEY_ROW apart (8 more than the
longest row, so rows of 2^k floats do not share L1 sets), each product compiled for its
operand's row stride (`_rows_times`), so that LLVM needs one overlap check per loop rather than
one per pair of row views. Key loops run to `last`, a multiple of LANES past the block's last
visible key (scratch is zero-padded, keys past the visible ones zeroed by a select): no scalar
remainder loops. Every index is unsigned and no loop slices a row view: Numba wraps a signed
index at every load, and a view costs two reference-count updates.

Why each of these choices, and what it was worth (in-process A/B timings): docs/kernels.md,
"Attention".
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._fastexp import exp_nonpositive
from tinyformer.kernels.numba._rowmax import four_row_maxima
from tinyformer.kernels.numba._rows import FASTMATH, U
from tinyformer.kernels.numba._tasks import claim, new_counter
from tinyformer.kernels.numba._tile import tile8, tile16, tile32, tile_by_element, wide_tiles
from tinyformer.kernels.numba._transpose import copy_transposed

# Key loops run to a multiple of this. 16 (one 512-bit vector) wastes more keys on causal
# blocks and measured no faster on the AMD machine's AVX-512: backward 0.49 ms either way.
LANES = 8
SHORT_KEYS = 256  # up to this many keys, each (batch, head) pair on one thread
SHORT_HEAD = 128  # and head sizes up to this
# Row strides of the scratch. 8 more than the longest row, so that rows 2**k floats long do not
# fall into the same few sets of the L1 cache.
KEY_ROW = SHORT_KEYS + 8
FEATURE_ROW = SHORT_HEAD + 8
WIDE = wide_tiles()  # tiles of 32 columns only where they fit the vector registers (_tile.py)


@njit(fastmath=FASTMATH, cache=True)
def mask_rows(keep, bias, starts, row_steps, b, i, n):
    """Row i (n keys) of the keep and bias masks of (batch, head) pair b: slices of the masks'
    flat buffers, which start at starts[m, b] with rows row_steps[m] elements apart (0 for a
    mask broadcast over the queries). An unused mask is one element with row step 0, so its
    slice stays in bounds; the flags say not to read it."""
    k0 = starts[0, b] + i * row_steps[0]
    b0 = starts[1, b] + i * row_steps[1]
    return keep[k0 : k0 + n], bias[b0 : b0 + n]


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
def _four_exps(s, n0, n1, n2, n3, last, t0, t1, t2, t3):
    """In place on the four rows s[r KEY_ROW:][:last]: exp(s - t_r) for the visible keys j < n_r,
    0 from n_r on; returns the four sums. One loop for the block's four rows, running to `last`
    (a multiple of LANES) with a select: no scalar remainder loops, the per-call set-up paid once
    a block, and the rows at constant distances in one array, so that LLVM vectorises without
    run-time overlap checks (see `four_row_maxima` in _rowmax.py for the figures)."""
    zero = s.dtype.type(0)
    s0, s1, s2, s3 = zero, zero, zero, zero
    r1, r2, r3 = U(KEY_ROW), U(2 * KEY_ROW), U(3 * KEY_ROW)
    v0, v1, v2, v3 = U(n0), U(n1), U(n2), U(n3)
    for j in range(U(last)):
        e0 = exp_nonpositive(s[j] - t0)
        e1 = exp_nonpositive(s[r1 + j] - t1)
        e2 = exp_nonpositive(s[r2 + j] - t2)
        e3 = exp_nonpositive(s[r3 + j] - t3)
        s[j] = e0 = e0 if j < v0 else zero
        s[r1 + j] = e1 = e1 if j < v1 else zero
        s[r2 + j] = e2 = e2 if j < v2 else zero
        s[r3 + j] = e3 = e3 if j < v3 else zero
        s0 += e0
        s1 += e1
        s2 += e2
        s3 += e3
    return s0, s1, s2, s3


@njit(fastmath=FASTMATH, cache=True)
def _offset(steps, which, b0, b1):
    """Where pair (b0, b1) of input `which` starts in its flat buffer."""
    return steps[which, 0] * b0 + steps[which, 1] * b1


@njit(fastmath=FASTMATH, cache=True)
def _copy(buf, start, step, rows, cols, dst, dst_row, factor):
    """Rows of buf (row i at start + i * step, cols long) into flat scratch rows dst_row apart:
    row i to dst[i * dst_row:] * factor. (Transposed copies: `copy_transposed`.) Unsigned
    indices, not row views: two views a row (their reference counts) took two thirds of the
    time at 32 columns."""
    n, dst_u = U(cols), U(dst_row)
    for i in range(U(rows)):
        src = U(start) + i * U(step)
        at = i * dst_u
        for t in range(n):
            dst[at + t] = buf[src + t] * factor


def _rows_times(b_row: int):
    """The product below, for operand rows b_row apart."""
    b_u = U(b_row)

    @njit(fastmath=FASTMATH, cache=True)
    def four_rows_times(a, a_row, a_col, i0, b, k, m, out, o0, o_row, t0):
        """out[o0 + r o_row + j] = sum_t a[(i0 + r) a_row + t a_col] b[t b_row + j] for r < 4,
        j < m, t0 <= t < k, in register tiles of 32 (where WIDE), 16 and 8 columns (_tile.py);
        the last m % 8 columns (odd head sizes) one at a time. (S = Q K^T: a = Q, b = K^T, j
        over keys; P V and dS K: a = P or dS, j over features; dK = dS^T Q and dV = P^T dY:
        a_row = 1 and a_col = KEY_ROW read dS or P transposed; t0 = the first query that sees
        the keys. `out` is scratch, or for four rows of dQ, dK or dV the gradient itself, o_row
        its row stride.)"""
        a_step, a_term, mu, o_at, o_u = U(a_row), U(a_col), U(m), U(o0), U(o_row)
        a_at = U(i0) * a_step
        j = U(0)
        if WIDE:  # a compile-time constant: Numba drops the branch it does not take
            while j + U(32) <= mu:
                tile32(a, a_at, a_step, a_term, b, j, b_u, t0, k, out, o_at + j, o_u)
                j += U(32)
        while j + U(16) <= mu:
            tile16(a, a_at, a_step, a_term, b, j, b_u, t0, k, out, o_at + j, o_u)
            j += U(16)
        if j + U(8) <= mu:
            tile8(a, a_at, a_step, a_term, b, j, b_u, t0, k, out, o_at + j, o_u)
            j += U(8)
        if j < mu:
            tile_by_element(a, a_at, a_step, a_term, b, j, b_u, t0, k, out, o_at + j, o_u, mu - j)

    return four_rows_times


_times_keys = _rows_times(KEY_ROW)  # S = Q K^T, dP = dY V^T: rows of keys
_times_features = _rows_times(FEATURE_ROW)  # P V, dS K, dS^T Q, P^T dY


@njit(fastmath=FASTMATH, cache=True)
def _visible(i, tq, tk, causal):
    """How many keys query row i sees (0 for a padding row, i >= tq)."""
    return 0 if i >= tq else (min(i + 1, tk) if causal else tk)


@njit(fastmath=FASTMATH, cache=True)
def _shift(n, top, zero):
    """(keys to exponentiate, shift) of a row with n visible keys and maximum top: none, and a
    shift of 0 rather than -inf, for a fully masked row."""
    return (0, zero) if top == -np.inf else (n, top)


@njit(fastmath=FASTMATH, cache=True)
def _finish_row(b, i, n, top, total, lse, inv, r):
    """lse[b, i] and inv[r] = 1 / sum of row i (inv 0 for a padding row or a fully masked one,
    whose lse is +inf)."""
    inv[r] = 0
    if n and top == -np.inf:  # every key masked: weights 0, output 0, lse +inf
        lse[b, i] = np.inf
    elif n:
        inv[r] = inv.dtype.type(1) / total
        lse[b, i] = top + np.log(total)


@njit(fastmath=FASTMATH, cache=True)
def _block_softmax(s, b, i0, tq, tk, keep, bias, starts, row_steps, flags, lse, inv, last):
    """Rows s[r KEY_ROW:] = scaled scores of query i0 + r -> exp(s + mask - max), zero past the
    visible keys; fills lse[b, i] and inv[r] = 1 / sum (0 for a padding row or a fully masked
    one). The four rows go through each step together (`four_row_maxima`, `_four_exps`)."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    n0, n1 = _visible(i0, tq, tk, causal), _visible(i0 + 1, tq, tk, causal)
    n2, n3 = _visible(i0 + 2, tq, tk, causal), _visible(i0 + 3, tq, tk, causal)
    if has_keep or has_bias:
        one = s.dtype.type(1)
        for r in range(4):
            i, n = i0 + r, (n0, n1, n2, n3)[r]
            if n:
                keep_row, bias_row = mask_rows(keep, bias, starts, row_steps, b, i, tk)
                row = s[r * KEY_ROW : (r + 1) * KEY_ROW]
                scale_and_mask(row, n, one, keep_row, bias_row, has_keep, has_bias)
    m0, m1, m2, m3 = four_row_maxima(s, KEY_ROW, n0, n1, n2, n3, last)
    zero = s.dtype.type(0)
    e0, t0 = _shift(n0, m0, zero)
    e1, t1 = _shift(n1, m1, zero)
    e2, t2 = _shift(n2, m2, zero)
    e3, t3 = _shift(n3, m3, zero)
    s0, s1, s2, s3 = _four_exps(s, e0, e1, e2, e3, last, t0, t1, t2, t3)
    _finish_row(b, i0, n0, m0, s0, lse, inv, 0)
    _finish_row(b, i0 + 1, n1, m1, s1, lse, inv, 1)
    _finish_row(b, i0 + 2, n2, m2, s2, lse, inv, 2)
    _finish_row(b, i0 + 3, n3, m3, s3, lse, inv, 3)


@njit(fastmath=FASTMATH, cache=True)
def _softmax_grad_row(p, ds, i, n, last, gys, dv, y, y_at, lse_i, factor, scale):
    """In place over keys to `last` of row i (at i KEY_ROW in p and ds): p <- P = exp(s factor -
    lse), ds <- dS = P (dP - D) scale with D = dy . y (dy's row at i FEATURE_ROW in gys, y's at
    y_at); both 0 from key n on (not visible). Running to `last` with a select, not to n,
    leaves no scalar remainder loop. Indices, not row views: here the views' reference counting
    cost ~30 ns a row, a third of the function."""
    zero = p.dtype.type(0)
    big_d = zero
    g_at, y_u = U(i * FEATURE_ROW), U(y_at)
    for t in range(U(dv)):
        big_d += gys[g_at + t] * y[y_u + t]
    at, n_u = U(i * KEY_ROW), U(n)
    for j in range(U(last)):
        e = exp_nonpositive(p[at + j] * factor - lse_i)
        e = e if j < n_u else zero
        p[at + j] = e
        ds[at + j] = e * (ds[at + j] - big_d) * scale


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def pairs_forward(
    q, k, v, steps, dims, keep, bias, starts, row_steps, flags, scale, workers, y, lse
):
    """q, k, v and the output y: flat buffers, steps[n] the element strides (batch, head, row)
    of q, k, v, y; dims = (B, H, Tq, Tk, d, dv). y and lse (BH, Tq) are filled."""
    causal = flags[2]
    n0, n1, tq, tk, d, dv = dims
    tkp = (tk + LANES - 1) // LANES * LANES
    pairs = n0 * n1
    one = y.dtype.type(1)
    tasks = new_counter()  # pairs are claimed one at a time (_tasks.py)
    for _ in prange(workers):
        # Zeros where no copy writes: rows past tq, keys past tk (padding, read as 0).
        qs = np.zeros((tq + 3) // 4 * 4 * FEATURE_ROW, y.dtype)
        kt, vs = np.zeros(d * KEY_ROW, y.dtype), np.zeros(tkp * FEATURE_ROW, y.dtype)
        s, out = np.empty(4 * KEY_ROW, y.dtype), np.empty(4 * FEATURE_ROW, y.dtype)
        inv = np.empty(4, y.dtype)
        b = claim(tasks)
        while b < pairs:
            b0, b1 = b // n1, b % n1
            _copy(q, _offset(steps, 0, b0, b1), steps[0, 2], tq, d, qs, FEATURE_ROW, scale)
            copy_transposed(k, _offset(steps, 1, b0, b1), steps[1, 2], tk, d, kt, KEY_ROW)
            _copy(v, _offset(steps, 2, b0, b1), steps[2, 2], tk, dv, vs, FEATURE_ROW, one)
            for i0 in range(0, tq, 4):
                last = min((i0 + 4 + LANES - 1) // LANES * LANES, tkp) if causal else tkp
                # S = Q_block K^T -> exp(S - max) in place -> Y_block * sum = exp(S - max) V
                _times_keys(qs, FEATURE_ROW, 1, i0, kt, d, last, s, 0, KEY_ROW, 0)
                _block_softmax(
                    s, b, i0, tq, tk, keep, bias, starts, row_steps, flags, lse, inv, last
                )
                _times_features(s, KEY_ROW, 1, 0, vs, last, dv, out, 0, FEATURE_ROW, 0)
                for r in range(min(4, tq - i0)):
                    at = _offset(steps, 3, b0, b1) + (i0 + r) * steps[3, 2]
                    # Unsigned: a signed `at + t` is wrapped element by element (~10% of the
                    # backward over its three outputs, measured).
                    at_u, src, factor = U(at), U(r * FEATURE_ROW), inv[r]
                    for t in range(U(dv)):
                        y[at_u + t] = out[src + t] * factor
            b = claim(tasks)


@njit(fastmath=FASTMATH, cache=True)
def _store_rows(g_b, rows, cols, out, at, step):
    """out[at + r step:][:cols] = the first `rows` rows of the 4-row scratch g_b."""
    n, start, step_u = U(cols), U(at), U(step)
    for r in range(U(rows)):
        dst, src = start + r * step_u, r * U(FEATURE_ROW)
        for t in range(n):
            out[dst + t] = g_b[src + t]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def pairs_backward(
    gy, q, k, v, y, steps, dims, lse, keep, bias, starts, row_steps, flags, scale, workers,
    gq, gk, gv,
):  # fmt: skip
    """gy, q, k, v, y and the outputs gq, gk, gv: flat buffers, steps[n] the element strides
    (batch, head, row) of the n-th in that order; dims = (B, H, Tq, Tk, d, dv); lse (BH, Tq)."""
    has_keep, has_bias, causal = flags[0], flags[1], flags[2]
    n0, n1, tq, tk, d, dv = dims
    zero, one = gq.dtype.type(0), gq.dtype.type(1)
    padded = (tq + 3) // 4 * 4
    tkp = (tk + LANES - 1) // LANES * LANES
    pairs = n0 * n1
    tasks = new_counter()  # pairs are claimed one at a time (_tasks.py)
    for _ in prange(workers):
        # Zeros where no copy writes: rows past tq, keys past tk (padding, read as 0).
        qs, gys = np.zeros(padded * FEATURE_ROW, gq.dtype), np.zeros(padded * FEATURE_ROW, gq.dtype)
        ks = np.zeros(tkp * FEATURE_ROW, gq.dtype)
        kt, vt = np.zeros(d * KEY_ROW, gq.dtype), np.zeros(dv * KEY_ROW, gq.dtype)
        # P and dS of every query row, kept for dK and dV after the row blocks
        p, ds = np.empty(padded * KEY_ROW, gq.dtype), np.empty(padded * KEY_ROW, gq.dtype)
        g_b = np.empty(4 * FEATURE_ROW, gq.dtype)
        b = claim(tasks)
        while b < pairs:
            b0, b1 = b // n1, b % n1
            at_k, at_y = _offset(steps, 2, b0, b1), _offset(steps, 4, b0, b1)
            _copy(gy, _offset(steps, 0, b0, b1), steps[0, 2], tq, dv, gys, FEATURE_ROW, one)
            _copy(q, _offset(steps, 1, b0, b1), steps[1, 2], tq, d, qs, FEATURE_ROW, one)
            _copy(k, at_k, steps[2, 2], tk, d, ks, FEATURE_ROW, one)
            copy_transposed(k, at_k, steps[2, 2], tk, d, kt, KEY_ROW)
            copy_transposed(v, _offset(steps, 3, b0, b1), steps[3, 2], tk, dv, vt, KEY_ROW)
            for i0 in range(0, tq, 4):
                last = min((i0 + 4 + LANES - 1) // LANES * LANES, tkp) if causal else tkp
                o0 = i0 * KEY_ROW  # this block's rows of P and dS
                # S = Q_block K^T into P's rows, dP = dY_block V^T into dS's rows
                _times_keys(qs, FEATURE_ROW, 1, i0, kt, d, last, p, o0, KEY_ROW, 0)
                _times_keys(gys, FEATURE_ROW, 1, i0, vt, dv, last, ds, o0, KEY_ROW, 0)
                for i in range(i0, i0 + 4):
                    n = _visible(i, tq, tk, causal)
                    if n == 0:  # a padding row
                        p[i * KEY_ROW : i * KEY_ROW + last] = zero
                        ds[i * KEY_ROW : i * KEY_ROW + last] = zero
                    else:
                        factor = scale  # without a mask, scaling rides along in the exp
                        if has_keep or has_bias:
                            keep_row, bias_row = mask_rows(keep, bias, starts, row_steps, b, i, tk)
                            row_p = p[i * KEY_ROW : (i + 1) * KEY_ROW]
                            scale_and_mask(row_p, n, scale, keep_row, bias_row, has_keep, has_bias)
                            factor = one
                        y_at = at_y + i * steps[4, 2]
                        _softmax_grad_row(
                            p, ds, i, n, last, gys, dv, y, y_at, lse[b, i], factor, scale
                        )
                # dQ_block = dS K, into dQ's rows (a last block of fewer rows via scratch)
                at, step = _offset(steps, 5, b0, b1) + i0 * steps[5, 2], steps[5, 2]
                if i0 + 4 <= tq:
                    _times_features(ds, KEY_ROW, 1, i0, ks, last, d, gq, at, step, 0)
                else:
                    _times_features(ds, KEY_ROW, 1, i0, ks, last, d, g_b, 0, FEATURE_ROW, 0)
                    _store_rows(g_b, tq - i0, d, gq, at, step)
            # dK and dV four keys at a time. Causal: query i sees keys up to i, so keys j0.. get
            # gradient only from queries j0..; those rows of P and dS were filled past j0 + 3.
            for j0 in range(0, tk, 4):
                first = min(j0, tq) if causal else 0
                rows = min(4, tk - j0)
                at_gk, step_k = _offset(steps, 6, b0, b1) + j0 * steps[6, 2], steps[6, 2]
                at_gv, step_v = _offset(steps, 7, b0, b1) + j0 * steps[7, 2], steps[7, 2]
                if rows == 4:  # dK_block = dS^T Q and dV_block = P^T dY, into their rows
                    _times_features(ds, 1, KEY_ROW, j0, qs, tq, d, gk, at_gk, step_k, first)
                    _times_features(p, 1, KEY_ROW, j0, gys, tq, dv, gv, at_gv, step_v, first)
                else:  # a last block of fewer keys, via scratch
                    _times_features(ds, 1, KEY_ROW, j0, qs, tq, d, g_b, 0, FEATURE_ROW, first)
                    _store_rows(g_b, rows, d, gk, at_gk, step_k)
                    _times_features(p, 1, KEY_ROW, j0, gys, tq, dv, g_b, 0, FEATURE_ROW, first)
                    _store_rows(g_b, rows, dv, gv, at_gv, step_v)
            b = claim(tasks)
