"""Checks of device data that would stall the GPU now, run at the next read instead.

Checking that indices are in range means reading a flag back from the device: a sync, which
waits for every queued kernel. Inside a training step that costs more than the step's math at
small sizes, so on a device the ops queue the flag instead (as CUDA's device-side asserts do),
and the error is raised at the next explicit read (`Tensor.item()`, `float(t)`, ...): the
training loop's periodic read of the loss, in practice. On the host the checks run at once.

    bad = (indices < 0) | (indices >= n)
    device_checks.check(bad, lambda: OpError(f"embedding: index ... out of range"))

The message is built only when a check fails, so it may read the device data it describes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyformer import backend

__all__ = ["check", "pending", "run"]

LIMIT = 64  # queued checks that force a read: bounds the memory their flags hold
_queue: list[tuple[Any, Callable[[], Exception]]] = []


def check(bad: Any, error: Callable[[], Exception]) -> None:
    """Raise `error()` if any element of the boolean array `bad` is true: now for host arrays,
    at the next read for device arrays."""
    if not backend.is_device_array(bad):
        if bad.any():
            raise error()
        return
    _queue.append((bad.any(), error))  # a 0-d device array: no read yet
    if len(_queue) >= LIMIT:
        run()


def pending() -> int:
    """How many device checks wait for the next read."""
    return len(_queue)


def run() -> None:
    """Read every queued flag (one read per device) and raise the first failed check's error."""
    if not _queue:
        return
    queued = list(_queue)
    _queue.clear()
    by_module: dict[Any, list[int]] = {}
    for i, (flag, _) in enumerate(queued):
        by_module.setdefault(backend.get_array_module(flag), []).append(i)
    failed = []
    for xp, indices in by_module.items():
        flags = backend.to_host(xp.stack([queued[i][0] for i in indices]))
        failed += [i for i, bad in zip(indices, flags) if bad]
    if failed:
        raise queued[min(failed)][1]()
