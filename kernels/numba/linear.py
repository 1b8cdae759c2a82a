"""Numba kernel for linear: the matrix products run on Numba's threads, BLAS inside each.

Why: a training step switches back and forth between matrix products and Numba kernels. With
BLAS on its own thread pool, the two pools take turns with the cores and each must wake its
sleeping workers after the other; with BLAS on one thread (`runtime.apply_settings` sets it at
the first op) and each product's rows split over Numba's workers, one pool does all the work,
and its workers can busy-wait between kernels instead of sleeping (docs/kernels.md, "Two
thread pools on two cores take turns").

Per worker w, owning a block of rows (the products are BLAS calls on the block):
    forward    y[w] = x[w] W^T + b         (the bias is added while the block is in cache)
    backward   gx[w] = gy[w] W,  gW_w = gy[w]^T x[w],  gb_w = column sums of gy[w]
               then gW = sum_w gW_w and gb = sum_w gb_w (one partial per worker: no races;
               worker 0's goes straight into gW and gb, the others are added in parallel).

The registry picks this kernel only when every BLAS library in the process runs on one thread:
with a multi-threaded BLAS, the workers' concurrent calls fight over BLAS's own threads. Under
`prefer("numba", force=True)` it always runs; small test products are single-threaded inside
BLAS anyway.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._blas import blas_one_thread
from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, pool_size, read_only
from tinyformer.registry import kernel

MIN_ROWS = 64  # below this, one BLAS call on one thread is as quick as splitting it


def blas_single_threaded(*args, **kwargs) -> bool:
    """every BLAS library loaded runs on one thread (as tinyformer sets it at the first op,
    unless you chose otherwise) and the product has at least 64 (MIN_ROWS) rows"""
    return args[0].shape[0] >= MIN_ROWS and blas_one_thread()


@njit(cache=True, inline="always")
def _block(w, workers, rows):
    """The rows [start, stop) of worker w."""
    return w * rows // workers, (w + 1) * rows // workers


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _forward(x, w, b, has_b, workers, y):
    rows, w_t = x.shape[0], w.T  # F-ordered: BLAS reads it transposed
    for worker in prange(workers):
        start, stop = _block(worker, workers, rows)
        np.dot(x[start:stop], w_t, y[start:stop])
        if has_b:
            for i in range(start, stop):
                row = y[i]
                for j in range(row.size):
                    row[j] += b[j]


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _backward(gy, x, w, need_x, need_w, need_b, workers, gx, gw, gb, gw_rest, gb_rest):
    """Worker 0 writes its partial gW and gb into gw and gb, the others into gw_rest[p - 1]
    and gb_rest[p - 1]; a second pass adds those in, one row of gW per task."""
    rows = gy.shape[0]
    for p in prange(workers):
        start, stop = _block(p, workers, rows)
        g = gy[start:stop]
        if need_x:
            np.dot(g, w, gx[start:stop])
        if need_w:
            np.dot(g.T, x[start:stop], gw if p == 0 else gw_rest[p - 1])
        if need_b:
            sums = gb if p == 0 else gb_rest[p - 1]
            sums[:] = 0
            for i in range(stop - start):
                row = g[i]
                for j in range(row.size):
                    sums[j] += row[j]
    if need_w:
        for i in prange(gw.shape[0]):
            out = gw[i]
            for q in range(workers - 1):
                part = gw_rest[q, i]
                for j in range(out.size):
                    out[j] += part[j]
    if need_b:
        for q in range(workers - 1):
            for j in range(gb.size):
                gb[j] += gb_rest[q, j]


@kernel("linear.forward", backend="numba", dtypes=FLOATS, when=blas_single_threaded)
def linear_forward(x2: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    # Every array C-contiguous and read-only, so that the kernel compiles once per dtype
    x2, w = read_only(np.ascontiguousarray(x2)), read_only(np.ascontiguousarray(w))
    y = np.empty((x2.shape[0], w.shape[0]), x2.dtype)
    workers = max(1, min(pool_size(), x2.shape[0]))
    bias = read_only(np.ascontiguousarray(b) if b is not None else np.zeros(w.shape[0], x2.dtype))
    _forward(x2, w, bias, b is not None, workers, y)
    return y


@kernel("linear.backward", backend="numba", dtypes=FLOATS, when=blas_single_threaded)
def linear_backward(gy2, x2, w, need_x: bool, need_w: bool, need_b: bool):
    gy2, x2, w = (read_only(np.ascontiguousarray(a)) for a in (gy2, x2, w))
    rows, (n_out, n_in) = gy2.shape[0], w.shape
    workers = max(1, min(pool_size(), rows))
    dtype = gy2.dtype
    gx = np.empty((rows, n_in) if need_x else (0, n_in), dtype)
    gw = np.empty((n_out, n_in) if need_w else (0, n_in), dtype)
    gw_rest = np.empty((workers - 1, *gw.shape), dtype)
    gb, gb_rest = np.empty(n_out, dtype), np.empty((workers - 1, n_out), dtype)
    _backward(gy2, x2, w, need_x, need_w, need_b, workers, gx, gw, gb, gw_rest, gb_rest)
    return gx if need_x else None, gw if need_w else None, gb if need_b else None
