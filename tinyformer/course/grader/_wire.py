"""The grader's pipe between the parent (the instructor's checks) and a task's child process
(the student's code): length-prefixed messages of JSON and NumPy arrays, never pickle.

A message is a JSON document in which every array is replaced by {"a": k}, the k-th array of
the message; arrays travel as `np.save` bytes and are read back with `allow_pickle=False`, so
the parent never unpickles what the child sends. Everything is checked before any numeric use:
the frame's size (`MAX_BYTES`) before a byte of it is read, the JSON header's size
(`MAX_HEADER`), and each array's header: a numeric or boolean dtype (no strings, no structured
or object dtypes), and a shape whose size is exactly the bytes that follow, so that a reply
cannot make the parent allocate more than its own length. A malformed reply fails its task.

    frame := b"TFW1" | u64 length | u32 header length | header JSON | (u64 length | .npy)*

Both sides import only NumPy and the standard library here.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time
from typing import Any

import numpy as np

__all__ = ["MAX_BYTES", "WireError", "decode", "encode", "read_message", "write_message"]

MAGIC = b"TFW1"
# The largest reply of a correct submission to any request of the course's checks is 1.9 MB
# (A4's); 32 MiB leaves room for larger hidden-test inputs while bounding what one reply can
# make the parent hold (the frame, then at most as much again in arrays).
MAX_BYTES = 32 * 2**20
MAX_HEADER = 2**20  # the JSON part of a frame: names, flags and numbers, never bulk data
MAX_ARRAYS = 10_000
NUMERIC_KINDS = "biuf"  # bool, signed and unsigned integers, floats


class WireError(Exception):
    """A malformed message, a closed pipe, or a deadline passed (`timed_out`)."""

    def __init__(self, message: str, timed_out: bool = False, closed: bool = False) -> None:
        super().__init__(message)
        self.timed_out, self.closed = timed_out, closed


def _tag(v: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            raise TypeError("object arrays cannot cross the grader's pipe")
        arrays.append(v)
        return {"a": len(arrays) - 1}
    if isinstance(v, dict):
        return {"d": {str(k): _tag(x, arrays) for k, x in v.items()}}
    if isinstance(v, tuple | list):
        return {"t" if isinstance(v, tuple) else "l": [_tag(x, arrays) for x in v]}
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not np.isfinite(v):
        return {"f": repr(v)}  # JSON has no inf or nan
    if v is None or isinstance(v, bool | int | float | str):
        return {"v": v}
    raise TypeError(f"cannot send a {type(v).__name__} over the grader's pipe")


def _untag(node: Any, arrays: list[np.ndarray]) -> Any:
    if not isinstance(node, dict) or len(node) != 1:
        raise WireError("malformed message")
    ((kind, v),) = node.items()
    if kind == "a":
        if not isinstance(v, int) or not 0 <= v < len(arrays):
            raise WireError("malformed message (no such array)")
        return arrays[v]
    if kind == "d":
        if not isinstance(v, dict):
            raise WireError("malformed message")
        return {k: _untag(x, arrays) for k, x in v.items()}
    if kind in ("t", "l"):
        if not isinstance(v, list):
            raise WireError("malformed message")
        items = [_untag(x, arrays) for x in v]
        return tuple(items) if kind == "t" else items
    if kind == "f":
        if v not in ("inf", "-inf", "nan"):
            raise WireError("malformed message")
        return float(v)
    if kind == "v":
        if v is not None and not isinstance(v, bool | int | float | str):
            raise WireError("malformed message")
        return v
    raise WireError(f"malformed message (tag {kind!r})")


def encode(message: Any) -> bytes:
    """The frame of `message` (nested dicts, lists, tuples, scalars, strings and arrays)."""
    arrays: list[np.ndarray] = []
    header = json.dumps(_tag(message, arrays)).encode("utf-8")
    parts = [struct.pack("<I", len(header)), header]
    for a in arrays:
        buffer = io.BytesIO()
        np.save(buffer, a, allow_pickle=False)
        parts += [struct.pack("<Q", buffer.tell()), buffer.getvalue()]
    body = b"".join(parts)
    return MAGIC + struct.pack("<Q", len(body)) + body


def _array(data: memoryview) -> np.ndarray:
    """The array in the .npy bytes `data`, checked before anything is allocated."""
    from numpy.lib import format as npy

    stream = io.BytesIO(bytes(data[:4200]))  # the .npy header only: at most 4096 bytes + 12
    version = npy.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise WireError(f"malformed message (.npy version {version})")
    read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, fortran, dtype = read_header(stream, max_header_size=4096)
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise WireError(f"an array of dtype {dtype} (the grader takes numbers only)")
    count = math.prod(shape)
    body = data[stream.tell() :]
    if count * dtype.itemsize != len(body):
        raise WireError(f"malformed message (an array of shape {shape} in {len(body)} bytes)")
    flat = np.frombuffer(body, dtype=dtype, count=count)
    return flat.reshape(shape, order="F" if fortran else "C").copy()


def decode(body: bytes) -> Any:
    """The message of a frame's body; raises WireError if it is malformed or holds anything
    but numbers, strings and numeric arrays."""
    try:
        (n,) = struct.unpack_from("<I", body, 0)
        if n > MAX_HEADER:
            raise WireError(f"a message header of {n} bytes is over the limit of {MAX_HEADER}")
        header = json.loads(bytes(body[4 : 4 + n]).decode("utf-8"))
        arrays, at, view = [], 4 + n, memoryview(body)
        while at < len(body):
            if len(arrays) >= MAX_ARRAYS:
                raise WireError("too many arrays in one message")
            (size,) = struct.unpack_from("<Q", body, at)
            if at + 8 + size > len(body):
                raise WireError("malformed message (an array runs past the frame)")
            arrays.append(_array(view[at + 8 : at + 8 + size]))
            at += 8 + size
        return _untag(header, arrays)
    except WireError:
        raise
    except Exception as err:  # struct, JSON, NumPy's header parser: all say "malformed"
        raise WireError(f"malformed message ({type(err).__name__}: {str(err)[:200]})") from None


def write_message(fd: int, message: Any, deadline: float | None = None) -> None:
    """Write `message` to the pipe `fd`, waiting no later than `deadline` (time.monotonic())."""
    data = memoryview(encode(message))
    while data:
        _wait(fd, deadline, write=True)
        try:
            n = os.write(fd, data[: 1 << 16])
        except (BrokenPipeError, OSError) as err:
            raise WireError(f"the pipe closed ({err})", closed=True) from None
        data = data[n:]


def _wait(fd: int, deadline: float | None, write: bool = False) -> None:
    if deadline is None:
        return
    left = deadline - time.monotonic()
    ready = (
        select.select([], [fd], [], max(left, 0))
        if write
        else select.select([fd], [], [], max(left, 0))
    )
    if not any(ready):
        raise WireError("timed out", timed_out=True)


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes:
    chunks, left = [], n
    while left:
        _wait(fd, deadline)
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WireError("the pipe closed", closed=True)
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float | None = None, limit: int = MAX_BYTES) -> Any:
    """The next message on the pipe `fd`; WireError if it is malformed, larger than `limit`
    bytes, or not complete by `deadline`."""
    head = _read_exactly(fd, 12, deadline)
    if head[:4] != MAGIC:
        raise WireError("malformed message (no frame marker)")
    (size,) = struct.unpack("<Q", head[4:])
    if size > limit:
        raise WireError(f"a message of {size} bytes is over the limit of {limit}")
    if size < 4:
        raise WireError("malformed message (no header)")
    first = _read_exactly(fd, 4, deadline)  # the header's length, checked before the rest
    (n,) = struct.unpack("<I", first)
    if n > MAX_HEADER:
        raise WireError(f"a message header of {n} bytes is over the limit of {MAX_HEADER}")
    return decode(first + _read_exactly(fd, size - 4, deadline))
