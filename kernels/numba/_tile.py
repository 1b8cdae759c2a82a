"""Four output rows of a matrix product, their accumulators held in vector registers (no
kernels here).

    out[o_at + r o_row + j] = sum of a[a_at + r a_row + t a_col] b[b_at + t b_row + j]
                              over t0 <= t < t1, for r < 4 and j < width (8, 16 or 32)

Why: the short attention kernels' products are small (4 query rows, 8-64 keys or 16-128
features). Written as loops, the inner loop runs over the output's columns and LLVM vectorises
it, but it cannot keep a row of outputs in registers across the loop over t around it: every
four terms, each output vector was loaded, updated and stored again. Those loads and stores
and the loop's start-up capped the products at 55-90 GFLOP/s on one core of the AMD machine
(30 at 8 keys), where a 1024³ BLAS product runs at ~95.

How: `tile8`, `tile16` and `tile32` are Numba intrinsics that emit the loop over t directly in
LLVM IR. The 4 x width accumulators are vectors of 8 elements that live in registers (4 x 4 of
them for tile32: 16 of AVX-512's 32); each step of t loads width/8 vectors of b's row, reads
four elements of a, broadcasts each, and does 4 x width/8 fused multiply-adds. The outputs are
stored once, at the end. `tile32` only where `wide_tiles()`: AVX2's 16 registers
cannot hold it. In isolation, float32, one core: 100-105 GFLOP/s for 4 x 32 x 64, and
56-87 at 8-16 keys.

Callers keep every index in bounds: the loads and stores are not checked. Each function has a
plain-Python stand-in with the same arithmetic (for NUMBA_DISABLE_JIT=1); inside Numba kernels
the overload runs.
"""

from __future__ import annotations

import llvmlite.binding
from llvmlite import ir
from numba import types
from numba.core import cgutils, config
from numba.extending import intrinsic, overload, register_jitable

from tinyformer.kernels.numba._rows import U

LANES = 8  # elements per vector: one AVX register of float32, two of float64
ROWS = 4


def wide_tiles() -> bool:
    """Whether `tile32` fits the registers of the CPU Numba compiles for: its 16 accumulators,
    four row vectors of b and a broadcast need 21 vector registers. AVX-512 has 32; AVX2 has 16,
    and there LLVM keeps some accumulators on the stack, loading and storing them every term
    (two passes of `tile16`, 11 registers each, were 7% faster forward and 12% backward at the
    baby GPT's attention shapes, docs/kernels.md). A CPU named in NUMBA_CPU_NAME (portable
    caches) without NUMBA_CPU_FEATURES counts as the smaller."""
    if config.CPU_FEATURES is not None:
        return "+avx512f" in config.CPU_FEATURES.split(",")
    if config.CPU_NAME not in (None, "host"):
        return False
    return bool(llvmlite.binding.get_host_cpu_features().get("avx512f"))


@register_jitable
def tile_by_element(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row, width):
    """The tiles' sum, one element at a time, for any width: the tiles' plain-Python stand-ins,
    and in the kernels the columns past the last full tile (odd head sizes). Inside Numba the
    caller passes the indices unsigned (`U`), so that none is wrapped as a negative one."""
    zero = out.dtype.type(0)
    for r in range(U(ROWS)):
        row, dst = a_at + r * a_row, o_at + r * o_row
        for j in range(U(width)):
            total = zero
            for t in range(U(t0), U(t1)):
                total += a[row + t * a_col] * b[b_at + t * b_row + j]
            out[dst + j] = total


def _stand_in(width: int):
    def tile(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row):
        tile_by_element(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row, width)

    tile.__name__ = tile.__qualname__ = f"tile{width}"
    tile.__doc__ = f"The 4 x {width} tile (module doc). Pure-Python stand-in."
    return tile


def _intrinsic(width: int):
    vectors = width // LANES

    def tile(typingctx, a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row):
        sig = types.void(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row)

        def codegen(context, builder, signature, args):
            a_, a_at_, a_row_, a_col_, b_, b_at_, b_row_, t0_, t1_, out_, o_at_, o_row_ = args
            arrays = signature.args
            a_data = context.make_array(arrays[0])(context, builder, a_).data
            b_data = context.make_array(arrays[4])(context, builder, b_).data
            out_data = context.make_array(arrays[9])(context, builder, out_).data
            element = context.get_data_type(arrays[0].dtype)
            vector = ir.VectorType(element, LANES)
            align = context.get_abi_sizeof(element)  # rows start anywhere: unaligned moves
            i64 = ir.IntType(64)
            name = "llvm.fma.v8f32" if isinstance(element, ir.FloatType) else "llvm.fma.v8f64"
            fma = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(vector, [vector] * 3), name
            )
            zero = ir.Constant(vector, [0.0] * LANES)
            splat = ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES)

            def at(base, index):
                return cgutils.gep(builder, base, index)

            def vector_at(base, index):
                return builder.bitcast(at(base, index), vector.as_pointer())

            # Stack slots, promoted to registers by LLVM (they are in the entry block).
            accs = [
                [cgutils.alloca_once_value(builder, zero) for _ in range(vectors)]
                for _ in range(ROWS)
            ]
            a_rows = [
                builder.add(a_at_, builder.mul(a_row_, ir.Constant(i64, r))) for r in range(ROWS)
            ]
            with cgutils.for_range_slice(builder, t0_, t1_, ir.Constant(i64, 1)) as (t, _):
                b_t = builder.add(b_at_, builder.mul(t, b_row_))
                xs = [
                    builder.load(
                        vector_at(b_data, builder.add(b_t, ir.Constant(i64, h * LANES))),
                        align=align,
                    )
                    for h in range(vectors)
                ]
                a_t = builder.mul(t, a_col_)
                for r in range(ROWS):
                    scalar = builder.load(at(a_data, builder.add(a_rows[r], a_t)))
                    first = builder.insert_element(zero, scalar, ir.Constant(ir.IntType(32), 0))
                    broadcast = builder.shuffle_vector(first, zero, splat)
                    for h in range(vectors):
                        acc = accs[r][h]
                        builder.store(builder.call(fma, [broadcast, xs[h], builder.load(acc)]), acc)
            for r in range(ROWS):
                row = builder.add(o_at_, builder.mul(o_row_, ir.Constant(i64, r)))
                for h in range(vectors):
                    where = vector_at(out_data, builder.add(row, ir.Constant(i64, h * LANES)))
                    builder.store(builder.load(accs[r][h]), where, align=align)
            return context.get_dummy_value()

        return sig, codegen

    tile.__name__ = f"_tile{width}"
    return intrinsic(tile)


def _register(width: int):
    stand_in, compiled = _stand_in(width), _intrinsic(width)

    @overload(stand_in, inline="always")
    def _overload(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row):
        if isinstance(a, types.Array) and a.dtype == b.dtype == out.dtype:
            return lambda a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row: compiled(
                a, U(a_at), U(a_row), U(a_col), b, U(b_at), U(b_row), U(t0), U(t1), out, U(o_at),
                U(o_row)
            )  # fmt: skip
        return None

    return stand_in


tile8, tile16, tile32 = (_register(width) for width in (8, 16, 32))
