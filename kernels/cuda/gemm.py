"""A tiled GEMM for the matrix products of a captured step (plan in gemm.cu), and the linear
layer's CUDA kernels built on it.

    c = gemm(a, b, trans_b=True, bias=bias, gelu="tanh")    # gelu(a @ b.T + bias)
    gemm(gy, x, trans_a=True, out=gw, accumulate=True)       # gw += gy.T @ x

Why not always: cuBLAS is faster than this kernel at every size, but CuPy refuses any cuBLAS
call while a stream is being captured into a CUDA graph (measured: docs/cuda-kernels.md). So
the linear kernels here run only where a graph is being warmed up or captured
(`tinyformer.cuda_graphs.graph_safe()`), or where asked (`registry.prefer("cuda",
force=True)`, as the tests do); an eager step keeps the reference, `x @ w.T` on cuBLAS.
"""

from __future__ import annotations

from typing import Any

from tinyformer import cuda_graphs
from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry
from tinyformer.registry import kernel

__all__ = ["gemm", "linear_backward", "linear_forward"]

TILE = 64  # rows and columns of C per block (TILE in gemm.cu)
THREADS = (16, 16)  # a block (THREADS in gemm.cu)
MAX_GRID_Z = 65535  # CUDA's limit; the kernel loops over the batches past it
# The epilogue's flags (GEMM_* in gemm.cu).
BIAS, GELU, GELU_TANH, STORE_PRE, ACCUMULATE = 1, 2, 4, 8, 16
GELU_FLAGS = {None: 0, "none": GELU, "tanh": GELU_TANH}


def _matrix(name: str, x: Any, trans: bool) -> tuple[int, int, int]:
    """(batch, rows, cols) of op(x); batch 0 for a 2-D operand (shared by every batch)."""
    if x.ndim not in (2, 3):
        raise ValueError(f"gemm: {name} must be 2-D or 3-D (batch, rows, cols), got {x.shape}")
    rows, cols = x.shape[-2:]
    if trans:
        rows, cols = cols, rows
    return (x.shape[0] if x.ndim == 3 else 0), rows, cols


def gemm(
    a: Any,
    b: Any,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    bias: Any = None,
    gelu: str | None = None,
    pre: Any = None,
    out: Any = None,
    accumulate: bool = False,
) -> Any:
    """`op(a) @ op(b)` with op the transpose where asked, then the epilogue: `+ bias`, the
    pre-activation written to `pre`, GELU ("none": exact, "tanh"), `out +=` (accumulate).

    Shapes:
        a (M, K), or (K, M) with trans_a; b (K, N), or (N, K) with trans_b; either may have a
        leading batch axis (a 2-D operand is shared by every batch). bias (N,); out and pre
        (M, N) or (batch, M, N), C-contiguous, of a's dtype. Inputs that are not C-contiguous
        are copied (a transposed view is better passed as its base with trans_*).
    """
    xp = get_array_module(a)
    if a.dtype != b.dtype or a.dtype.name not in FLOATS:
        raise TypeError(f"gemm: a and b must both be float32 or float64, got {a.dtype}, {b.dtype}")
    (ba, m, k), (bb, k2, n) = _matrix("a", a, trans_a), _matrix("b", b, trans_b)
    if k != k2 or (ba and bb and ba != bb):
        raise ValueError(
            f"gemm: op(a) {(ba or '-', m, k)} and op(b) {(bb or '-', k2, n)} do not multiply "
            f"(trans_a={trans_a}, trans_b={trans_b})"
        )
    batch = max(ba, bb)
    shape = (batch, m, n) if batch else (m, n)
    if gelu not in GELU_FLAGS:
        raise ValueError(f"gemm: gelu must be None, 'none' or 'tanh', got {gelu!r}")
    flags = GELU_FLAGS[gelu] | (ACCUMULATE if accumulate else 0)
    if out is None:
        if accumulate:
            raise ValueError("gemm: accumulate=True adds into `out`; pass it")
        out = xp.empty(shape, a.dtype)
    _check_out("out", out, shape, a.dtype)
    if bias is not None:
        if bias.shape != (n,) or bias.dtype != a.dtype:
            raise ValueError(f"gemm: bias must be ({n},) {a.dtype}, got {bias.shape} {bias.dtype}")
        bias, flags = xp.ascontiguousarray(bias), flags | BIAS
    if pre is not None:
        if not gelu:
            raise ValueError("gemm: pre (the pre-activation) is written only with gelu")
        _check_out("pre", pre, shape, a.dtype)
        flags |= STORE_PRE
    if m and n:
        a, b = xp.ascontiguousarray(a), xp.ascontiguousarray(b)
        grid = (_runtime.blocks(n, TILE), _runtime.blocks(m, TILE), min(max(batch, 1), MAX_GRID_Z))
        args = (a, b, out if bias is None else bias, out, out if pre is None else pre, m, n, k,
                max(batch, 1), m * k if ba else 0, k * n if bb else 0, m * n if batch else 0,
                int(trans_a), int(trans_b), flags)  # fmt: skip
        _runtime.load("gemm").launch(entry("gemm", a), grid, THREADS, args)
    return out


def _check_out(name: str, x: Any, shape: tuple[int, ...], dtype: Any) -> None:
    if x.shape != shape or x.dtype != dtype or not x.flags.c_contiguous:
        raise ValueError(
            f"gemm: {name} must be a C-contiguous {shape} {dtype} array, got {x.shape} {x.dtype}"
            + ("" if x.flags.c_contiguous else " (not C-contiguous)")
        )


def _graph_safe(*args: Any) -> bool:
    """Only while a CUDA graph is warmed up or captured: elsewhere cuBLAS (the reference's
    `@`) is faster, and only capture refuses it."""
    return cuda_graphs.graph_safe()


def _one_dtype(x2: Any, w: Any, b: Any) -> bool:
    """x, W and b of one dtype (the GEMM does not promote; the reference does)."""
    return x2.dtype == w.dtype and (b is None or b.dtype == w.dtype)


def _one_dtype_backward(gy2: Any, x2: Any, w: Any, *needs: bool) -> bool:
    """gy, x and W of one dtype."""
    return gy2.dtype == x2.dtype == w.dtype


@kernel("linear.forward", backend="cuda", dtypes=FLOATS, when=_graph_safe, accepts=_one_dtype)
def linear_forward(x2: Any, w: Any, b: Any) -> Any:
    """x2 (rows, in), w (out, in), b (out,) or None -> y (rows, out) = x2 w^T + b."""
    return gemm(x2, w, trans_b=True, bias=b)


@kernel(
    "linear.backward",
    backend="cuda",
    dtypes=FLOATS,
    when=_graph_safe,
    accepts=_one_dtype_backward,
)
def linear_backward(
    gy2: Any, x2: Any, w: Any, need_x: bool, need_w: bool, need_b: bool
) -> tuple[Any, Any, Any]:
    """-> gx = gy2 w (rows, in), gw = gy2^T x2 (out, in), gb = sum of gy2's rows (out,)."""
    gx = gemm(gy2, w) if need_x else None
    gw = gemm(gy2, x2, trans_a=True) if need_w else None
    gb = gy2.sum(axis=0) if need_b else None  # a CuPy reduction: one launch, and it captures
    return gx, gw, gb
