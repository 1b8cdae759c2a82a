"""Array plumbing shared by the CUDA kernel wrappers (no kernels here)."""

from __future__ import annotations

from typing import Any

from tinyformer.backend import get_array_module

FLOATS = ("float32", "float64")
SUFFIX = {"float32": "f32", "float64": "f64"}


def entry(name: str, x: Any) -> str:
    """The entry point of `name` for x's dtype: "softmax_forward" -> "softmax_forward_f32"."""
    return f"{name}_{SUFFIX[x.dtype.name]}"


def as_rows(x: Any) -> Any:
    """x as a C-contiguous (rows, last axis) device array: a view when x is contiguous."""
    x = get_array_module(x).ascontiguousarray(x)
    return x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)


def row_threads(cols: int, most: int = 256) -> int:
    """Threads for a block that owns one row: a multiple of 32 covering `cols`, at most `most`.
    Short rows get one warp, not 256 threads of which most would idle."""
    return min(most, max(32, -(-cols // 32) * 32))


def rowwise(module: Any, name: str, *arrays: Any) -> Any:
    """Launch `name` with one block per row of the arrays, out last; return out in their shape."""
    rows = [as_rows(a) for a in arrays]
    out = get_array_module(rows[-1]).empty_like(rows[-1])
    n, cols = out.shape
    if n and cols:
        module.launch(entry(name, out), n, row_threads(cols), (*rows, out, cols))
    return out.reshape(arrays[-1].shape)
