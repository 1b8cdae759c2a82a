"""A vectorisable max over a 1-D array (or its first n elements), for use inside Numba kernels.

Why: a plain running max (`top = max(top, x[j])`, or `x.max()`) is one chain of dependent
compare-and-selects, and LLVM (as shipped with llvmlite) will not vectorise a floating-point max
reduction unless the whole function promises no NaNs, which our fast-math flags do not (see
FASTMATH in _rows.py). Scalar, that costs about 1 ns per element: more than the vectorised exp
that follows it in a softmax. Eight independent running maxima over interleaved elements have no
chain between them, so LLVM's SLP vectorizer packs them into one vector compare and select;
they are combined at the end.

Same result as np.max, +-inf and NaN included: a NaN wins every comparison (`_larger`).
"""

from __future__ import annotations

from numba import njit

from tinyformer.kernels.numba._rows import FASTMATH


@njit(fastmath=FASTMATH, cache=True)
def _larger(a, b):
    return a if a > b or a != a else b  # a != a: a is NaN, and NaN wins, as in np.max


@njit(fastmath=FASTMATH, cache=True)
def row_max(x, n):
    """max(x[:n]) for n >= 1."""
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[0]
    j = 0
    while j + 8 <= n:
        m0, m1 = _larger(x[j], m0), _larger(x[j + 1], m1)
        m2, m3 = _larger(x[j + 2], m2), _larger(x[j + 3], m3)
        m4, m5 = _larger(x[j + 4], m4), _larger(x[j + 5], m5)
        m6, m7 = _larger(x[j + 6], m6), _larger(x[j + 7], m7)
        j += 8
    top = _larger(
        _larger(_larger(m0, m1), _larger(m2, m3)), _larger(_larger(m4, m5), _larger(m6, m7))
    )
    for k in range(j, n):
        top = _larger(x[k], top)
    return top
