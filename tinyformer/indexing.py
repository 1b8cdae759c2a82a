"""Indices as the array module sees them: what `x[index]` and `x[index] = value` share.

An index may hold Tensors, lists and arrays (integer arrays and boolean masks, for advanced
indexing) beside slices, integers, None and Ellipsis. Before NumPy (or CuPy, or the fake device)
sees it, each Tensor becomes its array, which must be on the indexed array's device already (as
for every op), and host data (lists, NumPy arrays) is moved there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend

__all__ = ["has_integer_array", "normalize_index"]


def _is_array(p: Any) -> bool:
    return isinstance(p, np.ndarray) or backend.is_device_array(p)


def normalize_index(array: Any, index: Any, op: str = "getitem") -> Any:
    """`index` with its Tensors, lists and arrays as arrays on `array`'s device. A Tensor on
    another device is refused (ValueError naming `op`); host data is moved."""
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if _is_array(p) or isinstance(p, list):
            p = backend.to_device(p, backend.device_of(array))
        elif hasattr(p, "grad_fn") and hasattr(p, "data"):  # a Tensor (which imports this module)
            backend.check_same_device(op, array, p.data)
            p = p.data
        out.append(p)
    return tuple(out) if isinstance(index, tuple) else out[0]


def has_integer_array(index: Any) -> bool:
    """Whether a normalized index holds an integer array (which may pick an element twice)."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(_is_array(p) and p.dtype.kind in "iu" for p in parts)
