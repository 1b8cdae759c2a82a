"""Numba kernels for conv2d at stride 1: direct convolution on a padded grid, no im2col matrix.

Why not im2col: the reference copies the kh kw shifted views of the input into one
(C kh kw, N Ho Wo) matrix, 9 times the input for a 3x3 kernel, and hands it to BLAS. At the
sizes here, building and reading that matrix costs more than the arithmetic. (One small image's
matrix at a time, which stays in the core's cache, is another matter: with BLAS on one thread,
images of up to 480 grid positions go to `_conv2d_images.py`'s per-image products.)

The padded-grid trick. Lay every channel out flat, image after image, each image in a slot of
rows of length Wp = W + pw: pw zero columns before each row, ph zero rows above each image (the
last row's and the last image's taps read the next row's and the next slot's leading zeros, so
the zeros are shared). At stride 1, the pixel under kernel tap (i, j) of output position p is
xp[p + i dh Wp + j dw]: each tap reads the same flat channel, shifted by a constant. So a run of
an output channel's positions is a sum of shifted input rows times scalar weights:
    y[o, p] = b[o] + sum_t w[o, t] xp[c(t), p + shift(t)],   t = (c, i, j).
Positions off the output (the zero columns and rows) are computed and dropped: 17 of every 81
for a 3x3 kernel on 8x8 digits, 129 of 4225 on 64x64 images. Runs cross image borders, so
they are long (512) whatever the image size: with one image per run, the digits' 80-position
runs spent as long on each pass's set-up as on its arithmetic. `_four_channels` does four
output channels at a time, four taps per pass over the run (16 multiply-adds per 8 loads).

Backward, the same two ideas:
- gx correlates gy with the flipped taps. Lay gy on the same grid (zeros off the image, and F =
  the largest shift of zeros in front): gxp[c, q] = sum_{o,i,j} w[o, c, i, j] gy[o, F + q -
  shift(i, j)], the forward's product with the roles of c and o swapped. Only the rows of the
  grid that hold an image are written, straight into gx.
- gw[o, t] = sum_p gy[o, p] xp[c(t), p + shift(t)]: dot products of gy rows with shifted input
  rows, four channels by four taps at a time (16 sums held in registers). Each worker sums its
  share of the runs into its own copy of gw; the copies are added.
Strided convolutions read every sh-th pixel, which does not vectorise this way: the kernel hands
them to the reference, and the registry's `when` rule does not pick it for them.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._conv2d_images import (
    grid_width,
    images_backward,
    images_forward,
    per_image,
)
from tinyformer.kernels.numba._rows import (
    FASTMATH,
    FLOATS,
    U,
    element_strides,
    pool_size,
    read_only,
    span,
)
from tinyformer.kernels.numba._tasks import claim, new_counter
from tinyformer.registry import kernel

RUN = 512  # positions per task: 4 output rows of RUN values stay in L1 beside 4 input rows


def stride_one(x, w, b, stride, *args) -> bool:
    """the stride is 1 (strided convolutions run the reference's im2col; on small images, with
    one group and BLAS on one thread, one BLAS product per image)"""
    return tuple(stride) == (1, 1)


def stride_one_backward(gy, x, w, stride, *args) -> bool:
    """the stride is 1 (strided convolutions run the reference's im2col; on small images, with
    one group and BLAS on one thread, two BLAS products per image)"""
    return tuple(stride) == (1, 1)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _lay_on_grid(x, front, ph, pw, slot, wp, out, sums):
    """out[c, front + n slot wp + (r + ph) wp + s + pw] = x[n, c, r, s], zeros elsewhere, written
    once; with sums.size > 0, sums[n, c] = the plane's sum (gb, when x is gy)."""
    n, c, h, w = x.shape
    plane, length, zero = slot * wp, out.shape[1], out.dtype.type(0)
    for task in prange(n * c):
        img, ch = task // c, task % c
        src, dst = x[img, ch], out[ch]
        start = front + img * plane
        stop = start + plane if img < n - 1 else length  # the last image clears the tail
        top = start + ph * wp + pw  # the first pixel's place
        dst[0 if img == 0 else start : top] = zero  # the first image clears the front
        # Element by element with unsigned indices, not by slices: for 8-pixel rows the two
        # slice assignments a row took twice as long (digits: 0.09 -> 0.05 ms for gy).
        total = zero
        for r in range(h):
            base = U(top + r * wp)
            for s in range(U(w)):
                value = src[r, s]
                dst[base + s] = value
                total += value
            end = U(top + r * wp + wp if r < h - 1 else stop)
            for s in range(base + U(w), end):
                dst[s] = zero  # the right padding, the next row's left, or the rest
        if sums.size:
            sums[img, ch] = total


@njit(fastmath=FASTMATH, cache=True)
def _four_channels(a, src, base, rows, offsets, q0, m, out):
    """out[k, :m] += sum_t a[k, t] src[base + rows[t], offsets[t] + q0 + (0..m)] for k < 4."""
    a0, a1, a2, a3 = a[0], a[1], a[2], a[3]
    o0, o1, o2, o3 = out[0], out[1], out[2], out[3]
    taps = a.shape[1]
    quads = taps // 4 * 4
    for t in range(0, quads, 4):
        b0 = src[base + rows[t], offsets[t] + q0 :]
        b1 = src[base + rows[t + 1], offsets[t + 1] + q0 :]
        b2 = src[base + rows[t + 2], offsets[t + 2] + q0 :]
        b3 = src[base + rows[t + 3], offsets[t + 3] + q0 :]
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
    for t in range(quads, taps):  # the last taps % 4
        c0, c1, c2, c3 = a0[t], a1[t], a2[t], a3[t]
        b_row = src[base + rows[t], offsets[t] + q0 :]
        for j in range(m):
            x = b_row[j]
            o0[j] += c0 * x
            o1[j] += c1 * x
            o2[j] += c2 * x
            o3[j] += c3 * x


@njit(fastmath=FASTMATH, cache=True)
def _task_grid(src, a, shape, slot, wp, row0):
    """`_correlate`'s task grid: (channels per group, input planes per group, grid positions,
    runs of RUN positions, blocks of 4 output channels)."""
    n_img, channels, hd, _ = shape
    groups, padded, _ = a.shape
    positions = (n_img - 1) * slot * wp + (row0 + hd) * wp  # up to the last image's last row
    runs = (positions + RUN - 1) // RUN
    return channels // groups, src.shape[0] // groups, positions, runs, padded // 4


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _correlate(src, a, init, rows, offsets, dst, shape, steps, slot, wp, row0, col0, workers):
    """dst[n, g per + k, r, s] = init[g per + k] + sum_t a[g, k, t] src[g per_src + rows[t],
    offsets[t] + q], q = n slot wp + (r + row0) wp + s + col0: the forward (src = padded x) and
    gx (src = gy on the grid, a = the weights with channels swapped). dst is the output's memory
    as a flat array (`_output`), with its shape and element strides. Tasks: (group, run, block
    of 4 channels), blocks innermost, so that consecutive tasks read the same run; the workers
    claim them one at a time (_tasks.py)."""
    _, _, _, runs, blocks = _task_grid(src, a, shape, slot, wp, row0)
    n_tasks = a.shape[0] * runs * blocks
    tasks = new_counter()
    for _ in prange(workers):
        out = np.empty((4, RUN), dst.dtype)  # a task's four output rows (its first m columns)
        task = claim(tasks)
        while task < n_tasks:
            _correlate_task(src, a, init, rows, offsets, dst, shape, steps, slot, wp, row0, col0,
                            task, out)  # fmt: skip
            task = claim(tasks)


@njit(fastmath=FASTMATH, cache=True)
def _correlate_task(src, a, init, rows, offsets, dst, shape, steps, slot, wp, row0, col0, task,
                    out):  # fmt: skip
    """Task `task` of `_correlate`, with `out` as its scratch."""
    per, per_src, positions, runs, blocks = _task_grid(src, a, shape, slot, wp, row0)
    zero = dst.dtype.type(0)
    _, _, hd, wd = shape
    blk, rest = task % blocks, task // blocks
    run, g = rest % runs, rest // runs
    q0 = run * RUN
    m = min(RUN, positions - q0)
    ks = min(4, per - blk * 4)  # channels of this block that exist (a's extra rows are 0)
    for k in range(4):
        out[k, :m] = init[g * per + blk * 4 + k] if k < ks else zero
    block = a[g, blk * 4 : blk * 4 + 4]
    _four_channels(block, src, g * per_src, rows, offsets, q0, m, out)
    for row in range(q0 // wp, (q0 + m - 1) // wp + 1):  # the grid rows this run touches
        n, r = row // slot, row % slot - row0
        if r < 0 or r >= hd:
            continue  # a padding row: computed, dropped
        lo, hi = max(q0, row * wp + col0), min(q0 + m, row * wp + col0 + wd)
        if hi <= lo:
            continue  # the run starts or ends in the padding beside this row
        start = lo - row * wp - col0  # where the run's part of the row starts in it
        for k in range(ks):
            # Flat, unsigned indices: a signed index that Numba cannot prove >= 0 pays a
            # wrap per element (digits forward 0.447 -> 0.398 ms when that went), and a
            # 4-D view per row cost ~5% of the digits forward (0.384 -> 0.363 ms).
            at = n * steps[0] + (g * per + blk * 4 + k) * steps[1] + r * steps[2]
            at, o, first = U(at + start * steps[3]), out[k], U(lo - q0)
            if steps[3] == 1:
                for q in range(U(hi - lo)):
                    dst[at + q] = o[first + q]
            else:  # a strided view (the transposed conv's phases)
                step = U(steps[3])
                for q in range(U(hi - lo)):
                    dst[at + q * step] = o[first + q]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _weight_grad(gyb, front, xp, rows, offsets, positions, groups, parts):
    """partial[part, o, t] = its share of sum_p gyb[o, front + p] xp[g per_src + rows[t],
    offsets[t] + p] over runs of p < positions: worker `part` sums the runs it claims. Blocks
    of 4 channels and 4 taps; a block's missing rows repeat its last one, and their sums are
    dropped."""
    outs, taps = gyb.shape[0], rows.size
    per, per_src = outs // groups, xp.shape[0] // groups
    runs = (positions + RUN - 1) // RUN
    partial = np.zeros((parts, outs, taps), gyb.dtype)
    # Flat buffers and unsigned offsets, not row views: eight views per block of 16 dot
    # products (two reference-count updates each) were ~15% of the digits' weight gradient.
    g_flat, g_len = gyb.reshape(-1), U(gyb.shape[1])
    x_flat, x_len = xp.reshape(-1), U(xp.shape[1])
    tasks = new_counter()  # runs are claimed one at a time (_tasks.py)
    for part in prange(parts):
        acc = partial[part]
        run = claim(tasks)
        while run < runs:
            p0 = run * RUN
            m = min(RUN, positions - p0)
            for g in range(groups):
                base = g * per_src  # this group's first input plane
                for ob in range(0, per, 4):
                    ks, last = min(4, per - ob), g * per + per - 1
                    o0 = g * per + ob
                    at = U(front + p0)
                    y0 = U(o0) * g_len + at
                    y1 = U(min(o0 + 1, last)) * g_len + at
                    y2 = U(min(o0 + 2, last)) * g_len + at
                    y3 = U(min(o0 + 3, last)) * g_len + at
                    for tb in range(0, taps, 4):
                        ls = min(4, taps - tb)
                        t1, t2, t3 = min(tb + 1, taps - 1), min(tb + 2, taps - 1), taps - 1
                        t3 = min(tb + 3, t3)
                        x0 = U(base + rows[tb]) * x_len + U(offsets[tb] + p0)
                        x1 = U(base + rows[t1]) * x_len + U(offsets[t1] + p0)
                        x2 = U(base + rows[t2]) * x_len + U(offsets[t2] + p0)
                        x3 = U(base + rows[t3]) * x_len + U(offsets[t3] + p0)
                        sums = _dot_block(g_flat, y0, y1, y2, y3, x_flat, x0, x1, x2, x3, m)
                        for k in range(ks):
                            for tap in range(ls):
                                acc[o0 + k, tb + tap] += sums[k * 4 + tap]
            run = claim(tasks)
    return partial


@njit(fastmath=FASTMATH, cache=True)
def _dot_block(gy, y0, y1, y2, y3, xs, x0, x1, x2, x3, m):
    """The 16 dot products gy[y_k:] . xs[x_l:] over m values, row by row (k * 4 + l)."""
    zero = gy.dtype.type(0)
    s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = zero
    s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = zero
    for j in range(U(m)):
        g0, g1, g2, g3 = gy[y0 + j], gy[y1 + j], gy[y2 + j], gy[y3 + j]
        v0, v1, v2, v3 = xs[x0 + j], xs[x1 + j], xs[x2 + j], xs[x3 + j]
        s00 += g0 * v0
        s01 += g0 * v1
        s02 += g0 * v2
        s03 += g0 * v3
        s10 += g1 * v0
        s11 += g1 * v1
        s12 += g1 * v2
        s13 += g1 * v3
        s20 += g2 * v0
        s21 += g2 * v1
        s22 += g2 * v2
        s23 += g2 * v3
        s30 += g3 * v0
        s31 += g3 * v1
        s32 += g3 * v2
        s33 += g3 * v3
    return (s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)


@functools.lru_cache(maxsize=256)
def _taps(channels, kh, kw, row_step, col_step, front=0, sign=1):
    """rows[t], offsets[t] for t = (channel, i, j): the plane and front + sign * shift. Cached
    (read-only): building them took 0.02 ms, 5% of a digits-sized forward."""
    shift = (np.arange(kh)[:, None] * row_step + np.arange(kw) * col_step).ravel()
    rows = np.repeat(np.arange(channels), kh * kw)
    return read_only(rows), read_only(np.tile(front + sign * shift, channels))


def _blocks(a):
    """a (g, k, taps) -> (g, k rounded up to a multiple of 4, taps), zero rows added."""
    padded = np.zeros((a.shape[0], -(-a.shape[1] // 4) * 4, a.shape[2]), a.dtype)
    padded[:, : a.shape[1]] = a
    return padded


def _output(dst: np.ndarray):
    """`_correlate`'s view of an output (N, C, H, W), maybe strided: the memory it spans as a
    flat array, its shape and its element strides (>= 0)."""
    steps = element_strides(dst)
    if min(steps) < 0:
        raise ValueError(f"conv kernels write only through non-negative strides, got {steps}")
    return span(dst), dst.shape, steps


def _grid(x, front, ph, pw, slot, wp, length, with_sums=False):
    """x (N, C, H, W) laid on the flat padded grid (C, length), image after image; and the
    plane sums."""
    out = np.empty((x.shape[1], length), x.dtype)
    sums = np.empty(x.shape[:2] if with_sums else (0, 0), x.dtype)
    _lay_on_grid(read_only(np.ascontiguousarray(x)), front, ph, pw, slot, wp, out, sums)
    return out, sums


def _input_grid(x, kh, kw, padding, dilation):
    """x on the flat grid of slots, plus the tail the last row's taps read: (xp, slot, wp).

    A slot is an image with ph zero rows above and pw zero columns before each row; the slot's
    last zero rows and columns are shared with the next slot (an output pixel's window reaches
    ph rows or pw columns past its image, which are the next slot's leading zeros). More rows
    or columns only when the output is larger than that (padding > dilation (k - 1))."""
    (ph, pw), (dh, dw), (n, _, h, width) = padding, dilation, x.shape
    slot = h + max(ph, 2 * ph - dh * (kh - 1))
    wp = grid_width(width, kw, pw, dw)
    length = (n - 1) * slot * wp + (h + 2 * ph) * wp + dw * (kw - 1)  # the last tap's last read
    xp, _ = _grid(x, 0, ph, pw, slot, wp, length)  # >= n slot wp, as slot <= h + 2 ph
    return xp, slot, wp


@kernel("conv2d.forward", backend="numba", dtypes=FLOATS, accepts=stride_one)
def conv2d_forward(x, w, b, stride, padding, dilation, groups):
    if per_image(x, w, padding, dilation, groups):
        return images_forward(x, w, b, padding, dilation)
    n = x.shape[0]
    o, per, kh, kw = w.shape
    (ph, pw), (dh, dw) = padding, dilation
    xp, slot, wp = _input_grid(x, kh, kw, padding, dilation)
    ho = x.shape[2] + 2 * ph - dh * (kh - 1)
    wo = x.shape[3] + 2 * pw - dw * (kw - 1)
    rows, offsets = _taps(per, kh, kw, dh * wp, dw)
    a = _blocks(np.ascontiguousarray(w).reshape(groups, o // groups, per * kh * kw))
    init = np.zeros(o, x.dtype) if b is None else np.ascontiguousarray(b, x.dtype)
    y = np.empty((n, o, ho, wo), x.dtype)
    workers = numba.get_num_threads()
    args = (read_only(xp), read_only(a), read_only(init), rows, offsets, *_output(y), slot, wp)
    _correlate(*args, 0, 0, workers)
    return y


@kernel("conv2d.backward", backend="numba", dtypes=FLOATS, accepts=stride_one_backward)
def conv2d_backward(gy, x, w, stride, padding, dilation, groups):
    """-> gx, gw, gb."""
    if per_image(x, w, padding, dilation, groups):
        return images_backward(gy, x, w, padding, dilation)
    n, c, h, width = x.shape
    o, per, kh, kw = w.shape
    (ph, pw), (dh, dw) = padding, dilation
    xp, slot, wp = _input_grid(x, kh, kw, padding, dilation)
    ho = gy.shape[2]
    front = dh * (kh - 1) * wp + dw * (kw - 1)  # the largest shift
    gy = gy.astype(x.dtype, copy=False)
    gyb, sums = _grid(gy, front, 0, 0, slot, wp, front + n * slot * wp, True)

    # gx: channels and output channels swap places; taps read gy at F - shift.
    og = o // groups
    flipped = np.ascontiguousarray(w).reshape(groups, og, per, kh * kw).transpose(0, 2, 1, 3)
    a = _blocks(flipped.reshape(groups, per, og * kh * kw))
    rows, offsets = _taps(og, kh, kw, dh * wp, dw, front=front, sign=-1)
    gx = np.empty((n, c, h, width), x.dtype)
    zeros = read_only(np.zeros(c, x.dtype))
    workers = numba.get_num_threads()
    args = (read_only(gyb), read_only(a), zeros, rows, offsets, *_output(gx), slot, wp)
    _correlate(*args, ph, pw, workers)

    # gw: gy is zero off the image, so every grid position up to the last image's rows counts.
    rows, offsets = _taps(per, kh, kw, dh * wp, dw)
    positions = (n - 1) * slot * wp + ho * wp
    parts = max(1, min(pool_size(), -(-positions // RUN)))
    gyb, xp = read_only(gyb), read_only(xp)
    partial = _weight_grad(gyb, front, xp, rows, offsets, positions, groups, parts)
    return gx, partial.sum(axis=0).reshape(w.shape), sums.sum(axis=0)
