"""The grader's pipe between the parent (the instructor's checks) and a task's child process
(the student's code): length-prefixed messages of JSON and NumPy arrays, never pickle.

A message is a JSON document in which every array is replaced by {"a": k}, the k-th array of
the message; arrays travel as `np.save` bytes and are read back with `allow_pickle=False`, so
the parent never unpickles what the child sends. Sizes are capped on reading: a child cannot
make the parent allocate more than `MAX_BYTES` for one reply.

    frame := b"TFW1" | u64 length | u32 header length | header JSON | (u64 length | .npy)*

Both sides import only NumPy and the standard library here.
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from typing import Any

import numpy as np

__all__ = ["MAX_BYTES", "WireError", "decode", "encode", "read_message", "write_message"]

MAGIC = b"TFW1"
MAX_BYTES = 256 * 2**20
MAX_ARRAYS = 100_000


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
        return arrays[v]
    if kind == "d":
        return {k: _untag(x, arrays) for k, x in v.items()}
    if kind in ("t", "l"):
        items = [_untag(x, arrays) for x in v]
        return tuple(items) if kind == "t" else items
    if kind == "f":
        return float(v)
    if kind == "v":
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


def decode(body: bytes) -> Any:
    """The message of a frame's body; raises WireError if it is malformed."""
    try:
        (n,) = struct.unpack_from("<I", body, 0)
        header = json.loads(body[4 : 4 + n].decode("utf-8"))
        arrays, at = [], 4 + n
        while at < len(body):
            if len(arrays) >= MAX_ARRAYS:
                raise WireError("too many arrays in one message")
            (size,) = struct.unpack_from("<Q", body, at)
            arrays.append(np.load(io.BytesIO(body[at + 8 : at + 8 + size]), allow_pickle=False))
            at += 8 + size
        return _untag(header, arrays)
    except WireError:
        raise
    except Exception as err:  # struct, JSON, NumPy's header parser: all say "malformed"
        raise WireError(f"malformed message ({type(err).__name__}: {err})") from None


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
    return decode(_read_exactly(fd, size, deadline))
