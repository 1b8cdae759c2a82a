"""conv2d on small images as BLAS products, one image at a time (no kernels registered here:
conv2d.py calls these for stride 1 when BLAS runs on one thread, as the training commands set).

Why: on the digits CNN's 8x8 images, conv2d.py's loops over its padded grid spend a fifth of
their multiply-adds on the grid's zero rows and columns, and their 4x4 register blocks run at
about three quarters of the core's peak; BLAS does a (32, 144) @ (144, 72) product at ~100
GFLOP/s on one core. One image's im2col matrix (36 KiB for the digits' 16 channels) stays in
the core's cache from the copy to the product. On larger images the matrices leave the cache
and conv2d.py's loops win, so `per_image` takes this path only up to `POSITIONS`.

Each worker lays the images it claims, one at a time, on a small padded grid of its own, the
layout of conv2d.py's (pixel (r, q) at (r + ph) wp + q + pw, zeros around). The zeros are
written once: every image puts its pixels in the same places. The output rows are then the
m = Ho wp consecutive grid positions from 0, and tap (c, i, j) reads them shifted by
s(i, j) = i dh wp + j dw, so im2col is one contiguous copy of m values per tap:
    cols[(c, i, j), t] = grid[c, s(i, j) + t]                           (C kh kw, m)
    y[n, o, r, q] = b[o] + (W cols)[o, r wp + q]    W = w as (Co, C kh kw); the wp - Wo
                                                    extra columns of each row are dropped
Backward lays gy on a grid with F = s(kh - 1, kw - 1) zeros in front (pixel (r, q) at F + r wp +
q). gx correlates gy with the flipped kernel, so its im2col is one copy per tap too (reading at
F - s(i, j) with the kernel unflipped ran 4x slower):
    gcols[(o, i, j), t] = ggrid[o, ph wp + s(i, j) + t]                 (Co kh kw, H wp)
    gx[n, c, r, q] = (W2 gcols)[c, r wp + pw + q]   W2[c, (o, i, j)] = w[o, c, kh-1-i, kw-1-j]
    gw^T += cols G^T                                G[o, t] = ggrid[o, F + t], t < m
G is copied transposed: OpenBLAS multiplies by a transposed operand at about half the speed.
Worker p sums the gw^T of images p, p + P, ... (P the pool's size) in its own copy; the copies
are added at the end, so the sum's order does not depend on the threads a call runs on.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._blas import blas_one_thread
from tinyformer.kernels.numba._rows import FASTMATH, U, pool_size, read_only
from tinyformer.kernels.numba._tasks import claim, new_counter

# Grid positions per image (Ho wp) up to which the products beat conv2d.py's loops (AMD Zen 4,
# float32, 3x3 kernels, 16 channels, in-process A/B: ahead at 8x8 and 20x20 images, behind at
# 24x24, where Ho wp = 24 x 25 = 600).
POSITIONS = 480


def grid_width(w: int, kw: int, pw: int, dw: int) -> int:
    """wp, the padded grid's row length (conv2d.py's too): room for the output row (Wo) and
    for pw zeros between rows."""
    return w + max(pw, 2 * pw - dw * (kw - 1))


def per_image(x, w, padding, dilation, groups) -> bool:
    """this path applies: one group, at most POSITIONS grid positions per image, a batch for
    every worker of the pool, and BLAS on one thread"""
    # The pool's size, not the threads this call gets (tinyformer.cores): the two paths round
    # differently, and a busy machine must not train to other numbers.
    (ph, pw), (dh, dw) = padding, dilation
    ho = x.shape[2] + 2 * ph - dh * (w.shape[2] - 1)
    positions = ho * grid_width(x.shape[3], w.shape[3], pw, dw)
    workers = pool_size()
    return groups == 1 and positions <= POSITIONS and x.shape[0] >= workers and blas_one_thread()


@njit(fastmath=FASTMATH, cache=True)
def _lay(src, first, at, h, w, wp, grid, length, sums):
    """grid[c length + at + r wp + q] = src[first + (c h + r) w + q]: one image's planes onto a
    grid whose zeros are in place; sums[c] = the plane's sum when sums has room for it."""
    for c in range(grid.size // length):
        total = grid.dtype.type(0)
        for r in range(h):
            d, s = U(c * length + at + r * wp), U(first + (c * h + r) * w)
            for q in range(U(w)):
                value = src[s + q]
                grid[d + q] = value
                total += value
        if sums.size:
            sums[c] = total


@njit(fastmath=FASTMATH, cache=True)
def _copy_taps(grid, length, start, kh, kw, dh, dw, wp, m, cols):
    """cols[(c, i, j), t] = grid[c length + start + s(i, j) + t] for t < m (both flat)."""
    row = U(0)
    for c in range(grid.size // length):
        for i in range(kh):
            for j in range(kw):
                at = U(c * length + start + i * dh * wp + j * dw)
                for t in range(U(m)):
                    cols[row + t] = grid[at + t]
                row += U(m)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, wm, b, kh, kw, ph, pw, dh, dw, wp, workers, y):
    n, c, h, w = x.shape
    co, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    m, length = ho * wp, (h + 2 * ph) * wp + dw * (kw - 1)  # the last tap's last read
    src, dst, no_sums = x.reshape(-1), y.reshape(-1), np.empty(0, x.dtype)
    tasks = new_counter()
    for _ in prange(workers):
        grid = np.zeros(c * length, x.dtype)
        cols, out = np.empty((c * kh * kw, m), x.dtype), np.empty((co, m), x.dtype)
        flat_cols, flat_out = cols.reshape(-1), out.reshape(-1)
        img = claim(tasks)
        while img < n:
            _lay(src, img * c * h * w, ph * wp + pw, h, w, wp, grid, length, no_sums)
            _copy_taps(grid, length, 0, kh, kw, dh, dw, wp, m, flat_cols)
            np.dot(wm, cols, out)
            for o in range(co):
                bias, at, row = b[o], U((img * co + o) * ho * wo), U(o * m)
                for r in range(U(ho)):
                    d, s = at + r * U(wo), row + r * U(wp)
                    for q in range(U(wo)):
                        dst[d + q] = flat_out[s + q] + bias
            img = claim(tasks)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, x, w2, kh, kw, ph, pw, dh, dw, wp, workers, gx, parts, sums):
    n, c, h, w = x.shape
    co, ho, wo = gy.shape[1], gy.shape[2], gy.shape[3]
    k, front = parts.shape[1], dh * (kh - 1) * wp + dw * (kw - 1)
    m, rows = ho * wp, h * wp  # grid positions of an image's output rows, of its input rows
    length = (h + 2 * ph) * wp + dw * (kw - 1)
    g_length = front + max(ho, h + ph) * wp  # up to gx's taps' last read
    src_g, src_x, dst = gy.reshape(-1), x.reshape(-1), gx.reshape(-1)
    # Worker p takes images p, p + workers, ...: a fixed share, not claimed from a counter, so
    # that each image's weight gradient lands in the same partial sum every run (the sum's
    # rounding, and so training, is then the same run after run).
    for p in prange(workers):
        grid, g_grid = np.zeros(c * length, x.dtype), np.zeros(co * g_length, x.dtype)
        gcols, out = np.empty((w2.shape[1], rows), x.dtype), np.empty((c, rows), x.dtype)
        cols, g_t = np.empty((k, m), x.dtype), np.empty((m, co), x.dtype)
        flat_gcols, flat_out = gcols.reshape(-1), out.reshape(-1)
        flat_cols, flat_g = cols.reshape(-1), g_t.reshape(-1)
        acc, part = parts[p], np.empty((k, co), x.dtype)
        acc[:] = 0
        for img in range(p, n, workers):
            # gx = W2 gcols; the grid's pw columns before each row, and its rows below, dropped
            _lay(src_g, img * co * ho * wo, front, ho, wo, wp, g_grid, g_length, sums[img])
            _copy_taps(g_grid, g_length, ph * wp, kh, kw, dh, dw, wp, rows, flat_gcols)
            np.dot(w2, gcols, out)
            for ch in range(c):
                at, row = U((img * c + ch) * h * w), U(ch * rows + pw)
                for r in range(U(h)):
                    d, s = at + r * U(w), row + r * U(wp)
                    for q in range(U(w)):
                        dst[d + q] = flat_out[s + q]
            # gw^T += cols G^T, G being gy's rows on its grid (zero in the columns past Wo)
            _lay(src_x, img * c * h * w, ph * wp + pw, h, w, wp, grid, length, sums[img, :0])
            _copy_taps(grid, length, 0, kh, kw, dh, dw, wp, m, flat_cols)
            for o in range(co):
                at = U(o * g_length + front)
                for t in range(U(m)):
                    flat_g[t * U(co) + U(o)] = g_grid[at + t]
            np.dot(cols, g_t, part)
            acc += part


def images_forward(x, w, b, padding, dilation):
    """conv2d's forward at stride 1, one group (`per_image` says when)."""
    n, c, h, width = x.shape
    co, _, kh, kw = w.shape
    (ph, pw), (dh, dw) = padding, dilation
    ho, wo = h + 2 * ph - dh * (kh - 1), width + 2 * pw - dw * (kw - 1)
    wm = read_only(np.ascontiguousarray(w, x.dtype).reshape(co, c * kh * kw))
    bias = read_only(np.zeros(co, x.dtype) if b is None else np.array(b, x.dtype))
    y = np.empty((n, co, ho, wo), x.dtype)
    args = (kh, kw, ph, pw, dh, dw, grid_width(width, kw, pw, dw), numba.get_num_threads(), y)
    _forward(read_only(np.ascontiguousarray(x)), wm, bias, *args)
    return y


def images_backward(gy, x, w, padding, dilation):
    """conv2d's backward at stride 1, one group: gx, gw, gb."""
    n, c, h, width = x.shape
    co, _, kh, kw = w.shape
    (ph, pw), (dh, dw) = padding, dilation
    flipped = np.asarray(w, x.dtype)[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
    w2 = read_only(np.ascontiguousarray(flipped).reshape(c, co * kh * kw))
    workers = pool_size()  # one partial sum of gw per share of the images, whatever the threads
    gx, parts = np.empty(x.shape, x.dtype), np.empty((workers, c * kh * kw, co), x.dtype)
    sums = np.empty((n, co), x.dtype)
    gy, x = (read_only(np.ascontiguousarray(a, x.dtype)) for a in (gy, x))
    wp = grid_width(width, kw, pw, dw)
    _backward(gy, x, w2, kh, kw, ph, pw, dh, dw, wp, workers, gx, parts, sums)
    return gx, parts.sum(axis=0).T.reshape(w.shape), sums.sum(axis=0)
