"""Array plumbing shared by the Numba kernel wrappers (no kernels here)."""

from __future__ import annotations

import numba
import numpy as np

FLOATS = ("float32", "float64")
# LLVM's fast-math flags minus "nnan" and "ninf": those let the compiler assume no NaN or Inf,
# but masked attention, masked_fill(-inf) + softmax and fully masked rows rely on -inf behaving
# exactly (exp(-inf) = 0). Reassociation (vectorised sums), contraction (FMA) and fast
# approximations of exp/log stay on.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}
# Unsigned loop indices (`for i in range(U(n))`, `U(start) + i`): Numba wraps an index it cannot
# prove >= 0 (a[-1] is the last element) with a select per element, and LLVM then compiles the
# loop's loads and stores as gathers and scatters instead of vector moves.
U = np.uint64


def pool_size() -> int:
    """The number of parts a kernel splits a sum into: the size of Numba's pool, not the
    threads a call runs on (the registry may run a call on fewer, see `tinyformer.cores`), so
    that a sum adds the same parts in the same order, to the bit, whatever that count."""
    return numba.config.NUMBA_NUM_THREADS


def flat(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous 1-D array (a view when x is contiguous)."""
    return np.ascontiguousarray(x).reshape(-1)


def rowwise(kernel, *arrays: np.ndarray) -> np.ndarray:
    """Run `kernel(*rows, out)` over the arrays as (rows, last axis); return out in their shape."""
    rows = [as_rows(a) for a in arrays]
    out = np.empty_like(rows[-1])
    if out.shape[1]:  # the kernels read each row's first element (e.g. its max)
        kernel(*rows, out)
    return out.reshape(arrays[-1].shape)


def as_rows(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous (rows, last axis) array: a view when x is contiguous, else a copy."""
    x = np.ascontiguousarray(x)
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def read_only(a: np.ndarray) -> np.ndarray:
    """A read-only view of `a`, for every array a kernel only reads. Why: Numba compiles a kernel
    once per combination of read-only and writeable arguments, and NumPy hands out both (views
    from broadcast_to are read-only); the test suite made 25 variants of each short kernel,
    seconds of compiling apiece. All read-only, it needs one per dtype."""
    view = a.view()
    view.flags.writeable = False
    return view


def span(a: np.ndarray) -> np.ndarray:
    """The memory `a` spans, from its first element, as a 1-D array (a view; strides >= 0).
    Kernels index it with element strides: a row of a strided view, sliced in Numba, compiles
    as a strided loop; a slice of this buffer as a contiguous one."""
    if a.flags.c_contiguous:
        return a.reshape(-1)
    size = 1 + sum((n - 1) * s for n, s in zip(a.shape, a.strides)) // a.itemsize
    return np.lib.stride_tricks.as_strided(a, (size,), (a.itemsize,))


def element_strides(a: np.ndarray) -> tuple[int, ...]:
    """a's strides in elements, as kernels index `span(a)`."""
    # From a list: ~0.2 µs a call faster than from a generator (attention calls it 8 times).
    return tuple([stride // a.itemsize for stride in a.strides])
