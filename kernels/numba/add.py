"""Numba kernel for add: a large same-shape sum split over the cores.

Why a kernel for what NumPy does in one line: in a training step, the residual stream's
`x + f(x)` reads arrays that both cores have just written, half each (every row-parallel kernel
splits its rows the same way). NumPy adds on one core, so half of each operand comes from the
other core's cache, at a fraction of the bandwidth: 57 µs in a tiny-ViT step for an addition
that takes 7 µs on warm data. Split over the cores, each core adds the half it wrote. Over
interleaved steps (kernels on every other step), this and split's backward kernel made the tiny
ViT's and the baby GPT's steps ~2% faster.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from tinyformer.kernels.numba._rows import FASTMATH, FLOATS, read_only
from tinyformer.ops.add import add_forward as reference
from tinyformer.registry import kernel

MIN_SIZE = 16384  # below this, NumPy's one-core add is as quick as starting the threads


def large_and_alike(x1, x2) -> bool:
    """both inputs are C-contiguous arrays of one shape and dtype with at least 16384 (MIN_SIZE)
    elements"""
    return _alike(x1, x2) and x1.size >= MIN_SIZE


def _alike(x1, x2) -> bool:
    return (
        isinstance(x2, np.ndarray)
        and x1.shape == x2.shape
        and x1.dtype == x2.dtype
        and x1.flags.c_contiguous
        and x2.flags.c_contiguous
    )


@njit(parallel=True, fastmath=FASTMATH, cache=True)
def _add(a, b, out):
    for i in prange(a.size):
        out[i] = a[i] + b[i]


@kernel("add.forward", backend="numba", dtypes=FLOATS, when=large_and_alike)
def add_forward(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    if not _alike(x1, x2):  # broadcasting, mixed dtypes, strided inputs: NumPy's rules apply
        return reference(x1, x2)
    out = np.empty_like(x1)
    _add(read_only(x1.reshape(-1)), read_only(x2.reshape(-1)), out.reshape(-1))
    return out
