"""A vectorisable max over a 1-D array (or its first n elements) and over four rows at once, for
use inside Numba kernels.

Why: a plain running max (`top = max(top, x[j])`, or `x.max()`) is one chain of dependent
floating-point compare-and-selects, and LLVM (as shipped with llvmlite) will not vectorise a
floating-point max reduction unless the whole function promises no NaNs, which our fast-math
flags do not (see FASTMATH in _rows.py). Scalar, that cost about 0.4 ns per element: as much as
the vectorised exp that follows it in a softmax. An integer max reduction has no such
condition. So each float is mapped to an integer that orders the same way, its bits with the
magnitude bits flipped when the sign bit is set (IEEE floats of one sign order like their bits;
negative ones in reverse), the integers' max is taken, and mapped back.

Same result as np.max, +-inf included; a NaN (of either sign) maps to the largest integer, so
it wins, as in np.max.
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from tinyformer.kernels.numba._rows import FASTMATH, U


def _flip_negatives(builder, bits, width):
    """bits with the magnitude bits flipped where the sign bit is set (an involution)."""
    int_type = ir.IntType(width)
    sign = builder.ashr(bits, ir.Constant(int_type, width - 1))  # 0 or all ones
    return builder.xor(bits, builder.and_(sign, _largest(width)))


def _largest(width):
    return ir.Constant(ir.IntType(width), (1 << (width - 1)) - 1)


@intrinsic
def order_key(typingctx, x):
    """x's bits as a signed integer of its width that orders like x; NaN -> the largest."""
    if not isinstance(x, types.Float):
        return None
    width = x.bitwidth
    sig = types.int32(x) if width == 32 else types.int64(x)

    def codegen(context, builder, signature, args):
        (value,) = args
        key = _flip_negatives(builder, builder.bitcast(value, ir.IntType(width)), width)
        is_nan = builder.fcmp_unordered("uno", value, value)
        return builder.select(is_nan, _largest(width), key)

    return sig, codegen


@intrinsic
def from_order_key(typingctx, key, like):
    """The float (of `like`'s type) whose `order_key` is `key`."""
    if not isinstance(like, types.Float):
        return None
    width = like.bitwidth
    sig = like(key, like)

    def codegen(context, builder, signature, args):
        key, float_type = args[0], args[1].type
        value = builder.bitcast(_flip_negatives(builder, key, width), float_type)
        is_nan = builder.icmp_signed("==", key, _largest(width))
        return builder.select(is_nan, ir.Constant(float_type, float("nan")), value)

    return sig, codegen


def row_max_at(x, at, n):
    """max(x[at : at + n]) for n >= 1: a row of a flat buffer, with no row view. Pure-Python
    stand-in; inside Numba kernels the overload below compiles."""
    return x[at : at + n].max()


@overload(row_max_at, jit_options={"fastmath": FASTMATH})
def _row_max_at_overload(x, at, n):
    def impl(x, at, n):
        start = U(at)
        top = order_key(x[start])
        for j in range(U(1), U(n)):
            key = order_key(x[start + j])
            top = key if key > top else top
        return from_order_key(top, x[start])

    return impl


def row_max(x, n):
    """max(x[:n]) for n >= 1 (pure-Python stand-in, which NUMBA_DISABLE_JIT=1 runs: intrinsics
    have no Python version; inside Numba kernels the overload below compiles)."""
    return x[:n].max()


@overload(row_max, jit_options={"fastmath": FASTMATH})
def _row_max_overload(x, n):
    # Its own loop, not row_max_at(x, 0, n): on a row view that measured 3-10% slower in the
    # softmax forward (3072 rows of 64).
    def impl(x, n):
        top = order_key(x[0])
        for j in range(1, n):
            key = order_key(x[j])
            top = key if key > top else top
        return from_order_key(top, x[0])

    return impl


def four_row_maxima(x, step, n0, n1, n2, n3, last):
    """The maxima of four rows x[r step:][:n_r], -inf for a row with n_r = 0; every n_r <= last
    (pure-Python stand-in; inside Numba kernels the overload below compiles)."""
    return tuple(
        x[r * step : r * step + n].max() if n else x.dtype.type(-math.inf)
        for r, n in enumerate((n0, n1, n2, n3))
    )


@overload(four_row_maxima, jit_options={"fastmath": FASTMATH})
def _four_row_maxima_overload(x, step, n0, n1, n2, n3, last):
    """One loop over the first `last` elements of all four rows, each element past a row's n_r
    read as -inf: four rows of a causal attention block share `last`, and one loop of four
    reductions vectorises where four short loops (the rows of a baby GPT's blocks are 8-64
    keys) ran mostly in their vector epilogues and scalar remainders (the attention forward
    0.38 -> 0.32 ms on one core, with `_four_exps` in _attention_short.py)."""

    def impl(x, step, n0, n1, n2, n3, last):
        lowest = order_key(x.dtype.type(-math.inf))
        m0, m1, m2, m3 = lowest, lowest, lowest, lowest
        r1, r2, r3 = U(step), U(2 * step), U(3 * step)
        v0, v1, v2, v3 = U(n0), U(n1), U(n2), U(n3)
        for j in range(U(last)):
            k0 = order_key(x[j]) if j < v0 else lowest
            k1 = order_key(x[r1 + j]) if j < v1 else lowest
            k2 = order_key(x[r2 + j]) if j < v2 else lowest
            k3 = order_key(x[r3 + j]) if j < v3 else lowest
            m0 = k0 if k0 > m0 else m0
            m1 = k1 if k1 > m1 else m1
            m2 = k2 if k2 > m2 else m2
            m3 = k3 if k3 > m3 else m3
        like = x[0]
        return (
            from_order_key(m0, like),
            from_order_key(m1, like),
            from_order_key(m2, like),
            from_order_key(m3, like),
        )

    return impl
