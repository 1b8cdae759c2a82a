"""CUDA kernels for fused softmax cross-entropy over rows of (R, C): log-sum-exp, the picked
logit and the row's sum in one read per row; the backward writes p - (1 - eps) onehot - eps / C
times gloss in one launch (plan in cross_entropy.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry, row_threads
from tinyformer.registry import kernel


def _targets(target: Any) -> Any:
    """The class indices as the kernels' `const long long*`: contiguous int64 (a copy only if
    the caller's were another integer type)."""
    xp = get_array_module(target)
    return xp.ascontiguousarray(target, dtype=xp.int64)


def _per_row(gloss: Any) -> tuple[Any, int]:
    """gloss (R,) as (contiguous array, stride between rows in elements). The "mean" and "sum"
    reductions hand back one number broadcast to every row (stride 0): passing its single
    element with stride 0 saves the launch that a contiguous copy would cost. Strides are
    metadata: reading them is no sync."""
    xp = get_array_module(gloss)
    if gloss.ndim == 1 and gloss.shape[0] and gloss.strides[0] == 0:
        return xp.ascontiguousarray(gloss[:1]), 0
    return xp.ascontiguousarray(gloss), 1


@kernel("cross_entropy.forward", backend="cuda", dtypes=FLOATS)
def cross_entropy_forward(
    logits: Any, target: Any, ignore_index: int, label_smoothing: float
) -> tuple[Any, Any]:
    xp = get_array_module(logits)
    logits = xp.ascontiguousarray(logits)
    rows, cols = logits.shape
    loss, lse = xp.empty(rows, logits.dtype), xp.empty(rows, logits.dtype)
    if rows:
        args = (logits, _targets(target), loss, lse, ignore_index, label_smoothing, cols)
        name = entry("cross_entropy_forward", logits)
        _runtime.load("cross_entropy").launch(name, rows, row_threads(cols), args)
    return loss, lse


@kernel("cross_entropy.backward", backend="cuda", dtypes=FLOATS)
def cross_entropy_backward(
    gloss: Any,
    logits: Any,
    target: Any,
    lse: Any,
    ignore_index: int,
    label_smoothing: float,
) -> Any:
    xp = get_array_module(logits)
    logits = xp.ascontiguousarray(logits)
    glogits = xp.empty_like(logits)
    rows, cols = logits.shape
    if rows and cols:
        gloss, stride = _per_row(gloss)
        lse = xp.ascontiguousarray(lse)
        args = (gloss, logits, _targets(target), lse, glogits, stride, ignore_index,
                label_smoothing, cols)  # fmt: skip
        name = entry("cross_entropy_backward", logits)
        _runtime.load("cross_entropy").launch(name, rows, row_threads(cols), args)
    return glogits
