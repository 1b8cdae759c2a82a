"""Read and write the safetensors format with NumPy alone (no torch, no `safetensors` package).

The format (https://github.com/huggingface/safetensors), all of it:

    8 bytes     N, the header length, unsigned little-endian
    N bytes     a JSON object: {name: {"dtype": "F32", "shape": [..], "data_offsets": [a, b]},
                ..., optionally "__metadata__": {str: str}}, padded with spaces
    the rest    the tensors' raw little-endian bytes; a tensor's bytes are [a, b) of this part

Nothing in it can run code (unlike a pickle), which is why checkpoints travel in it. Reading
checks everything a malformed or truncated file could get wrong: header size, JSON, known
dtypes, byte counts that match the shapes, offsets inside the file and not overlapping.
bfloat16 (BF16), which NumPy lacks, is widened to float32 exactly (it is float32's top half).
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.fileio import atomic_write
from tinyformer.tensor import Tensor

__all__ = ["SafetensorsError", "load_file", "read_header", "save_file"]

DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"), "BF16": np.dtype("<u2"),  # BF16: read as raw 16-bit words
}  # fmt: skip
_NAMES = {dtype: name for name, dtype in DTYPES.items() if name != "BF16"}
MAX_HEADER = 100 * 1024 * 1024  # the reference implementation's limit


class SafetensorsError(ValueError):
    """A file that is not valid safetensors, or a tensor that cannot be written as one."""


def read_header(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, str], int]:
    """(tensor entries, metadata, byte offset where the data starts) of a file, checked."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise SafetensorsError(f"{path}: {size} bytes is too short for a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise SafetensorsError(
                f"{path}: header length {n} does not fit in a file of {size} bytes"
            )
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
            raise SafetensorsError(f"{path}: the header is not valid JSON ({err})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header must be a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise SafetensorsError(f"{path}: __metadata__ must map strings to strings")
    data_size, spans = size - 8 - n, []
    for name, entry in header.items():
        if not _well_formed(entry):
            raise SafetensorsError(f"{path}: tensor {name!r} has a malformed entry {entry!s:.200}")
        dtype, shape, (start, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        if dtype not in DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}")
        count = math.prod(shape)  # Python ints: NumPy's int64 product could wrap to 0
        if end - start != count * DTYPES[dtype].itemsize or not 0 <= start <= end <= data_size:
            raise SafetensorsError(
                f"{path}: tensor {name!r} ({dtype} {shape}) claims bytes [{start}, {end}) of a "
                f"{data_size}-byte data section; its shape needs "
                f"{count * DTYPES[dtype].itemsize}"
            )
        spans.append((start, end, name))
    spans.sort()
    for (_, end, a), (start, _, b) in zip(spans, spans[1:]):
        if start < end:
            raise SafetensorsError(f"{path}: tensors {a!r} and {b!r} overlap")
    return header, metadata, 8 + n


def _well_formed(entry: Any) -> bool:
    """A dict with a dtype name, a shape of sizes and two byte offsets (sizes and offsets
    whole numbers >= 0): the header is JSON, so anything else can be written there."""

    def sizes(value: Any) -> bool:
        return isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
        )

    return (
        isinstance(entry, dict)
        and isinstance(entry.get("dtype"), str)
        and sizes(entry.get("shape"))
        and sizes(entry.get("data_offsets"))
        and len(entry["data_offsets"]) == 2
    )


def load_file(path: str | os.PathLike, names: Any = None) -> dict[str, np.ndarray]:
    """{name: array} for every tensor (or those in `names`). Arrays are copied out of a
    read-only memory map, so only the tensors asked for are read from disk."""
    header, _, offset = read_header(path)
    wanted = header.keys() if names is None else list(names)
    missing = [n for n in wanted if n not in header]
    if missing:
        raise SafetensorsError(f"{path}: no tensor named {missing[:5]}")
    out = {}
    raw = np.memmap(path, np.uint8, mode="r") if os.path.getsize(path) > offset else None
    for name in wanted:
        entry = header[name]
        start, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        chunk = raw[offset + start : offset + end] if raw is not None else np.empty(0, np.uint8)
        array = np.frombuffer(chunk.tobytes(), dtype).reshape(entry["shape"])
        if entry["dtype"] == "BF16":  # the top 16 bits of a float32
            out[name] = (array.astype(np.uint32) << 16).view(np.float32)
        else:
            out[name] = array.astype(dtype.newbyteorder("="), copy=False)
    return out


def save_file(
    tensors: Mapping[str, Any], path: str | os.PathLike, metadata: Mapping[str, str] | None = None
) -> None:
    """Write {name: array or Tensor} as safetensors (atomically: the file appears only when
    complete); device arrays are copied to the host. Tensors are laid out in name order, as the
    reference implementation does."""
    header: dict[str, Any] = {}
    if metadata:
        bad = {k: v for k, v in metadata.items() if not isinstance(v, str)}
        if bad or not all(isinstance(k, str) for k in metadata):
            raise SafetensorsError(f"save_file: metadata must map str to str, got {bad}")
        header["__metadata__"] = dict(metadata)
    arrays, offset = [], 0
    for name in sorted(tensors):
        value = tensors[name]  # a Tensor (a state_dict's values), or a host or device array
        array = backend.to_host(value.data if isinstance(value, Tensor) else value)
        dtype = array.dtype.newbyteorder("<") if array.dtype.itemsize > 1 else array.dtype
        if dtype not in _NAMES:
            raise SafetensorsError(f"save_file: tensor {name!r} has unsupported dtype {dtype}")
        array = np.asarray(array, dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
        header[name] = {
            "dtype": _NAMES[dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        arrays.append(array)
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned

    def write(f: Any) -> None:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for array in arrays:
            f.write(array.tobytes())

    atomic_write(path, write, mode="wb")
