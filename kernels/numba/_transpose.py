"""Transposed copies for Numba kernels, eight by eight in vector registers (no kernels here).

Why: the short attention kernels copy K (and, backward, V) transposed into scratch, so that
their score products run over contiguous keys. Written as loops, a transposed copy is one
scalar load and one scalar store per element: LLVM vectorises neither the strided stores nor
the strided loads of the other loop order (it measured the same). At the baby-GPT shapes the
backward's two transposes took 11% of its time on one core.

How: `transpose8` loads eight rows of eight elements as eight vectors, swaps the row and column
index one bit at a time, and stores the eight columns as eight vectors. Swapping bit k of the
row index with bit k of the column index is, for each row r, one two-input shuffle of the rows
r and r xor 2^k:

    new[r][c] = old[r with bit k set to bit k of c][c with bit k set to bit k of r]

Three rounds (k = 0, 1, 2) swap all three bits: new[r][c] = old[c][r]. That is 8 loads, 24
shuffles and 8 stores for 64 elements, instead of 64 loads and 64 stores; LLVM picks the
shuffle instructions (AVX, AVX-512 or NEON) for the element type.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from tinyformer.kernels.numba._rows import FASTMATH, U

BLOCK = 8


def transpose8(src, src_at, src_step, dst, dst_at, dst_step):
    """dst[dst_at + c dst_step + r] = src[src_at + r src_step + c] for r, c < 8. (Pure-Python
    stand-in, for NUMBA_DISABLE_JIT=1; inside Numba kernels the overload below runs.)"""
    for r in range(BLOCK):
        for c in range(BLOCK):
            dst[dst_at + c * dst_step + r] = src[src_at + r * src_step + c]


@intrinsic
def _transpose8(typingctx, src, src_at, src_step, dst, dst_at, dst_step):
    """The 8 x 8 block transpose, as vector loads, shuffles and stores (see the module doc).
    The caller keeps every index in bounds: these loads and stores are not checked."""
    sig = types.void(src, src_at, src_step, dst, dst_at, dst_step)

    def codegen(context, builder, signature, args):
        src_type, dst_type = signature.args[0], signature.args[3]
        source = context.make_array(src_type)(context, builder, args[0]).data
        target = context.make_array(dst_type)(context, builder, args[3]).data
        element = context.get_data_type(src_type.dtype)
        vector = ir.VectorType(element, BLOCK)
        align = context.get_abi_sizeof(element)  # rows start anywhere: unaligned moves
        i64 = ir.IntType(64)

        def row_pointer(base, at, step, r):
            index = builder.add(at, builder.mul(step, ir.Constant(i64, r)))
            return builder.bitcast(cgutils.gep(builder, base, index), vector.as_pointer())

        rows = [
            builder.load(row_pointer(source, args[1], args[2], r), align=align)
            for r in range(BLOCK)
        ]
        for k in range(3):
            bit = 1 << k
            new = []
            for r in range(BLOCK):
                mine = (r >> k) & 1
                # element c comes from row (r with bit k = c's bit k), column (c with bit k =
                # r's bit k); in the shuffle's concatenated input, row r & ~bit is 0..7 and
                # row r | bit is 8..15
                mask = [((c >> k) & 1) * BLOCK + ((c & ~bit) | (mine << k)) for c in range(BLOCK)]
                pick = ir.Constant(ir.VectorType(ir.IntType(32), BLOCK), mask)
                new.append(builder.shuffle_vector(rows[r & ~bit], rows[r | bit], pick))
            rows = new
        for c in range(BLOCK):
            builder.store(rows[c], row_pointer(target, args[4], args[5], c), align=align)
        return context.get_dummy_value()

    return sig, codegen


@overload(transpose8, inline="always")
def _transpose8_overload(src, src_at, src_step, dst, dst_at, dst_step):
    if isinstance(src, types.Array) and isinstance(dst, types.Array) and src.dtype == dst.dtype:
        return lambda src, src_at, src_step, dst, dst_at, dst_step: _transpose8(
            src, U(src_at), U(src_step), dst, U(dst_at), U(dst_step)
        )
    return None


@njit(fastmath=FASTMATH, cache=True)
def copy_transposed(src, start, step, rows, cols, dst, dst_row):
    """dst[t dst_row + i] = src[start + i step + t] for i < rows, t < cols: rows of src (step
    apart) into columns of the flat scratch dst (rows dst_row apart), 8 x 8 blocks in vector
    registers (`transpose8`), the edges element by element."""
    full_rows, full_cols = rows // BLOCK * BLOCK, cols // BLOCK * BLOCK
    for i0 in range(0, full_rows, BLOCK):
        for t0 in range(0, full_cols, BLOCK):
            transpose8(src, start + i0 * step + t0, step, dst, t0 * dst_row + i0, dst_row)
    for i in range(rows):  # the columns past the last full block, then the rows past it
        at = start + i * step
        first = full_cols if i < full_rows else 0
        for t in range(first, cols):
            dst[t * dst_row + i] = src[at + t]
