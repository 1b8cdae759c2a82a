"""Numba kernel for split's backward: the pieces' gradients placed side by side, with the rows
of the result split over the cores (why: kernels/numba/add.py; the pieces were just written by
row-parallel kernels, half on each core). In a transformer step these are attention's q, k and
v gradients, joined into the gradient of the qkv projection's output.

Each piece and the result are viewed as 2-D: along axis a > 0, as (rows before a, the rest), and
piece i lands in a band of columns; along axis 0, as (length of axis 0, the rest), and it lands
in a band of rows. Either way every element is written once, by the core that owns its row.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, read_only
from tinyformer.ops.split import split_backward as reference
from tinyformer.registry import kernel

MIN_SIZE = 16384  # below this, NumPy's one-core concatenate is as quick as starting the threads


def large_and_contiguous(*gys, axis) -> bool:
    """every piece is a C-contiguous array of one dtype, and they have at least 16384
    (MIN_SIZE) elements together"""
    return _contiguous(gys) and sum(g.size for g in gys) >= MIN_SIZE


def _contiguous(gys) -> bool:
    return all(g.flags.c_contiguous and g.dtype == gys[0].dtype for g in gys)


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _place(piece, out, row0, col0):
    """out[row0 + i, col0 + j] = piece[i, j]"""
    for i in prange(piece.shape[0]):
        src, dst = piece[i], out[row0 + i]
        for j in range(src.size):
            dst[col0 + j] = src[j]


@kernel("split.backward", backend="numba", dtypes=FLOATS, when=large_and_contiguous)
def split_backward(*gys: np.ndarray, axis: int) -> np.ndarray:
    if not _contiguous(gys):
        return reference(*gys, axis=axis)
    shape = list(gys[0].shape)
    shape[axis] = sum(g.shape[axis] for g in gys)
    out = np.empty(shape, gys[0].dtype)
    if out.size == 0:
        return out
    inner = math.prod(shape[axis + 1 :])  # elements per unit step along `axis`
    rows = shape[0] if axis == 0 else math.prod(shape[:axis])
    out2 = out.reshape(rows, -1)
    start = 0  # where the piece begins along `axis`
    for g in gys:
        if g.size:
            piece = read_only(g.reshape(rows if axis else g.shape[0], -1))
            if axis == 0:
                _place(piece, out2, start, 0)  # a band of rows
            else:
                _place(piece, out2, 0, start * inner)  # a band of columns
        start += g.shape[axis]
    return out
