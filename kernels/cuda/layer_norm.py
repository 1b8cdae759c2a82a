"""CUDA kernels for layer_norm over rows of (rows, C): a warp per row, and a deterministic
two-launch backward for the weight and bias gradients (plan in layer_norm.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry
from tinyformer.registry import kernel

WARPS = 4  # rows a forward block normalises, and warps a backward block has
THREADS = 32 * WARPS
# The backward writes one partial row of gw and gb per block: at most this many, so that the
# second launch sums a short column, while keeping enough blocks in flight to fill the GPU.
MAX_PARTS = 512


def _module() -> Any:
    return _runtime.load("layer_norm")


def _rows_per_block(rows: int) -> int:
    """Rows a backward block owns: at least one per warp, and few enough parts for the sum."""
    return max(WARPS, -(-rows // MAX_PARTS))


@kernel("layer_norm.forward", backend="cuda", dtypes=FLOATS)
def layer_norm_forward(x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any]:
    """x (rows, C), w and b (C,) or None -> y (rows, C), mu (rows,), rstd (rows,)."""
    xp = get_array_module(x)
    x = xp.ascontiguousarray(x)
    rows, cols = x.shape
    y = xp.empty_like(x)
    mu, rstd = xp.empty(rows, x.dtype), xp.empty(rows, x.dtype)
    if rows and cols:
        # An absent w or b is never read: x stands in for its pointer.
        w_arg = x if w is None else xp.ascontiguousarray(w, dtype=x.dtype)
        b_arg = x if b is None else xp.ascontiguousarray(b, dtype=x.dtype)
        args = (x, w_arg, b_arg, y, mu, rstd, rows, cols, eps, w is not None, b is not None)
        _module().launch(
            entry("layer_norm_forward", x), _runtime.blocks(rows, WARPS), THREADS, args
        )
    return y, mu, rstd


@kernel("layer_norm.backward", backend="cuda", dtypes=FLOATS)
def layer_norm_backward(gy: Any, x: Any, w: Any, mu: Any, rstd: Any) -> tuple[Any, Any, Any]:
    """gy, x (rows, C), w (C,) or None, mu and rstd (rows,) -> gx (rows, C), gw (C,), gb (C,)."""
    xp = get_array_module(x)
    x, gy = xp.ascontiguousarray(x), xp.ascontiguousarray(gy)
    mu, rstd = xp.ascontiguousarray(mu), xp.ascontiguousarray(rstd)
    rows, cols = x.shape
    gx = xp.empty_like(x)
    if not (rows and cols):  # no rows: the sums over rows are zero
        return gx, xp.zeros(cols, x.dtype), xp.zeros(cols, x.dtype)
    per_block = _rows_per_block(rows)
    parts = _runtime.blocks(rows, per_block)
    gw_part, gb_part = xp.empty((parts, cols), x.dtype), xp.empty((parts, cols), x.dtype)
    gw, gb = xp.empty(cols, x.dtype), xp.empty(cols, x.dtype)
    w_arg = x if w is None else xp.ascontiguousarray(w, dtype=x.dtype)  # never read when w is None
    module = _module()
    module.launch(
        entry("layer_norm_backward", x),
        parts,
        THREADS,
        (gy, x, w_arg, mu, rstd, gx, gw_part, gb_part, rows, cols, per_block, w is not None),
    )
    module.launch(
        entry("layer_norm_param_grads", x),
        _runtime.blocks(cols, 32),
        256,
        (gw_part, gb_part, gw, gb, parts, cols),
    )
    return gx, gw, gb
