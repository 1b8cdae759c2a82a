"""The grading data file: samples and the instructor's reference values, without pickle.

One `.npz` written with `np.savez` and read with `allow_pickle=False`: a JSON document under the
key "meta", and every array under a key of its own ("a0", "a1", ...). JSON holds the structure:

    {"format": 2, "assignment": "A2", "secret": false, "kernel_seeds": {},
     "tasks": {"A2.1": {"softmax": [{"seed": 3, "args": [...], "out": [...], "vjp": [...], ...}]}}}

where, in the stored JSON, every value is tagged with its kind: {"array": "a7"}, {"dict": {...}},
{"list": [...]}, {"tuple": [...]} or {"value": <a JSON number, string, bool or null>}.

It imports only NumPy and the standard library. The grader reads it in its own process; the
student's code never sees it.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

__all__ = ["FORMAT", "decode", "dumps", "encode", "loads"]

FORMAT = 2


class _Writer:
    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def value(self, v: Any) -> Any:
        if isinstance(v, np.ndarray):
            key = f"a{len(self.arrays)}"
            self.arrays[key] = np.array(v, order="C")  # ascontiguousarray would make 0-d 1-d
            return {"array": key}
        if isinstance(v, dict):
            return {"dict": {str(k): self.value(x) for k, x in v.items()}}
        if isinstance(v, tuple | list):
            return {"tuple" if isinstance(v, tuple) else "list": [self.value(x) for x in v]}
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or isinstance(v, bool | int | float | str):
            return {"value": v}
        raise TypeError(f"cannot store a {type(v).__name__} in the grading data")


def encode(meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """`meta` (arrays anywhere inside) -> the arrays for `np.savez`."""
    writer = _Writer()
    tree = writer.value(meta)
    return {"meta": np.array(json.dumps(tree, sort_keys=True)), **writer.arrays}


def _read(node: dict[str, Any], arrays: Any) -> Any:
    ((kind, v),) = node.items()
    if kind == "array":
        return np.asarray(arrays[v])
    if kind == "dict":
        return {k: _read(x, arrays) for k, x in v.items()}
    if kind in ("tuple", "list"):
        items = [_read(x, arrays) for x in v]
        return tuple(items) if kind == "tuple" else items
    return v


def decode(arrays: Any) -> dict[str, Any]:
    """The mapping `np.load` returned -> `meta` as it was given to `encode`."""
    meta = _read(json.loads(str(arrays["meta"])), arrays)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(f"grading data of format {found!r}; expected {FORMAT}")
    return meta


def dumps(meta: dict[str, Any]) -> bytes:
    """The .npz file's bytes."""
    buffer = io.BytesIO()
    np.savez(buffer, **encode(meta))
    return buffer.getvalue()


def loads(path: str) -> dict[str, Any]:
    """Read a grading data file; never unpickles."""
    with np.load(path, allow_pickle=False) as arrays:
        return decode(arrays)
