"""A vectorisable exp for arguments <= 0, for use inside Numba kernels.

Why: without Intel's SVML (pip's llvmlite is not built with it), LLVM cannot vectorise a loop
that calls libm's exp, while NumPy's own exp is SIMD code. This exp is only arithmetic, integer
bit tests and selects, which LLVM turns into vector instructions.

How, for x <= 0 (every use here: x - max(x), s - lse, log-probabilities):
    n = round(x / ln 2),  r = x - n ln 2 in [-ln2/2, ln2/2]      (Cody-Waite: ln 2 split in a
                                                                   high part with trailing zero
                                                                   bits, so n * hi is exact)
    exp(r) by its Taylor series (degree 7 in float32: error r^8/8! < 6e-9; degree 12 in float64:
    r^13/13! < 3e-16), in Horner form
    2^n written directly: the biased exponent n + 127 (or 1023) shifted into the exponent bits
    of a float (an LLVM bitcast, free, and vectorisable), exact
    exp(x) = exp(r) * 2^n, and 0 below the smallest normal result (exp(-87.3) in float32,
    exp(-708) in float64), so that exp(-inf) = 0 exactly, as masked attention needs.
Accuracy (tests/test_kernels.py checks it): float32 within 3 ulp. float64 within ~1e-15 relative
for x > -20 and ~3e-14 near -700: the kernels' fast-math flags allow reassociation, which can
merge the two halves of ln 2, so r loses ~n ulp; the weights there are below 1e-8 anyway.

`exp2_nonpositive_floored` is a leaner sibling for one caller, the tanh GELU: 2^t for t <= 0,
where the caller folds log2(e) into constants it multiplies by anyway. With the argument already
in base 2, f = t - n is exact (no Cody-Waite); the result is floored at twice the smallest
normal float instead of flushed to 0 (GELU only adds it to 1 or multiplies it by |x| <= 20);
and in float32 a fitted degree-6 polynomial stands in for the Taylor series of degree 7. About
four fewer vector instructions of twenty. The tanh GELU's forward on one core, 393,216 float32
elements (in-process, alternating calls): 0.165 ms with `exp_nonpositive` less its flush, 0.134
in base 2, 0.126 with the degree-6 fit as well.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable


def exp_nonpositive(x):
    """exp(x) for x <= 0 (pure-Python stand-in; inside Numba kernels the overload runs).

    Arguments up to ln(2)/2 ~ 0.35 are still exact (n = 0); rounding can push x - max(x) or
    s - lse a hair above 0, never that far.
    """
    return math.exp(x)


def exp2_nonpositive_floored(t):
    """2^t for t <= 0, but never below 2^-125 (float32) or 2^-1021 (float64), twice the smallest
    normal float, so that 2^-inf is not 0. Pure-Python stand-in; inside Numba kernels the
    overload below runs."""
    lowest = -125.0 if np.asarray(t).dtype == np.float32 else -1021.0
    return 2.0 ** max(float(t), lowest)


def _constants(dtype, degree: int, ln2_hi: float, ln2_lo: float):
    t = np.dtype(dtype).type
    taylor = np.array([1.0 / math.factorial(k) for k in range(degree, -1, -1)], dtype)
    lowest = math.log(np.finfo(dtype).tiny)  # below it, exp(x) is not a normal number: 0
    return taylor, t(ln2_hi), t(ln2_lo), t(1.0 / math.log(2.0)), t(lowest)


_F32 = _constants(np.float32, 7, 0.693359375, -2.12194440e-4)
_F64 = _constants(np.float64, 12, 6.93147180369123816490e-01, 1.90821492927058770002e-10)

# 2^f on |f| <= 1/2, highest power first. float32: a least-squares fit of degree 6 on Chebyshev
# nodes, weighted for relative error, made once with NumPy:
#     f = np.cos(np.linspace(0, np.pi, 4001)) / 2
#     c = chebyshev.cheb2poly(chebyshev.chebfit(2 * f, 2.0**f, 6, w=2.0**-f)) * 2.0**np.arange(7)
# Within 1.9e-9 of 2^f (0.84 ulp after Horner's rule in float32), where the Taylor series needs
# degree 7. float64: the Taylor series of exp(f ln 2), degree 12, error < 2e-16.
_EXP2_F32 = np.array(
    [
        0.0001533758102094819, 0.0013399865142027785, 0.009618519562455031,
        0.05550328985747788, 0.24022646608045028, 0.6931472056058905, 1.0000000005921674,
    ],
    np.float32,
)  # fmt: skip
_EXP2_F64 = np.array([math.log(2.0) ** k / math.factorial(k) for k in range(12, -1, -1)])


@intrinsic
def _power_of_two(typingctx, n, like):
    """2^n as a float of `like`'s type, for n >= -126 (float32) or -1022 (float64): the biased
    exponent n + bias shifted into the exponent field, reinterpreted as a float."""
    width = like.bitwidth
    sig = like(n, like)

    def codegen(context, builder, signature, args):
        bias, mantissa = (127, 23) if width == 32 else (1023, 52)
        int_type = ir.IntType(width)
        n_wide = builder.sext(args[0], int_type) if args[0].type.width < width else args[0]
        biased = builder.add(n_wide, ir.Constant(int_type, bias))
        bits = builder.shl(biased, ir.Constant(int_type, mantissa))
        return builder.bitcast(bits, ir.FloatType() if width == 32 else ir.DoubleType())

    return sig, codegen


def _horner(c, r):
    """The polynomial (degree 6, 7 or 12), written out: a loop here would block Numba's
    inliner."""
    p = (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) * r + c[6]
    if c.size == 7:
        return p
    if c.size == 8:
        return p * r + c[7]
    p = (((((p * r + c[7]) * r + c[8]) * r + c[9]) * r + c[10]) * r + c[11]) * r
    return p + c[12]


def _implementation(taylor, ln2_hi, ln2_lo, log2e, lowest):
    half = type(ln2_hi)(0.5)
    horner = register_jitable(_horner)

    def exp_impl(x):
        xc = max(x, lowest)  # also maps -inf to a finite value, so the product below is exact 0
        n = np.int32(np.floor(xc * log2e + half))
        nf = type(xc)(n)
        r = xc - nf * ln2_hi - nf * ln2_lo
        # (x >= lowest) as 1 or 0, not `a if c else b`: a branch in inlined code trips Numba's
        # SSA checks, and a select keeps the loop vectorisable.
        return horner(taylor, r) * _power_of_two(n, xc) * type(xc)(x >= lowest)

    return exp_impl


@overload(exp_nonpositive, inline="always")
def _exp_nonpositive_overload(x):
    if isinstance(x, types.Float):
        return _implementation(*(_F32 if x.bitwidth == 32 else _F64))
    return None


@overload(exp2_nonpositive_floored, inline="always")
def _exp2_nonpositive_floored_overload(t):
    if not isinstance(t, types.Float):
        return None
    c, lowest = (_EXP2_F32, np.float32(-125)) if t.bitwidth == 32 else (_EXP2_F64, -1021.0)
    half = c.dtype.type(0.5)
    horner = register_jitable(_horner)

    def exp2_impl(t):
        tc = max(t, lowest)  # also maps -inf to -125: 2^-125 exactly
        n = np.int32(np.floor(tc + half))
        return horner(c, tc - type(tc)(n)) * _power_of_two(n, tc)

    return exp2_impl
