"""Version counters: how the backward pass notices that an in-place op changed a saved array.

An op's backward often reads arrays its forward saved (`mul` saves both inputs, `exp` its
output). If one of them is changed in place before `backward()`, the gradient computed from it
is silently wrong. So, as in PyTorch, every in-place write bumps a version counter, and
backward compares the versions of the saved arrays with those they had when the op ran:

    x = tf.randn(3); w = tf.randn(3, requires_grad=True)
    y = (x * w).sum()   # Mul saves x (its gradient for w is x) at version 0
    x.zero_()           # x is now at version 1
    y.backward()        # RuntimeError: ... is at version 1; expected version 0 instead

A counter belongs to memory, not to a Tensor object: views (`x[1:]`, `x.T`, `x.detach()`)
share memory with their base, so writing through any of them bumps the one counter of the
array that owns the memory (the end of the `a.base` chain), as PyTorch's views share their
base's counter.

The check costs nothing where nothing is written in place (the usual training step):
- `clock` counts in-place writes, all arrays together. `Function.apply` notes it in each node
  it records, and the backward engine calls `check(node)` only if the clock has moved since;
- counters exist only for arrays that were written in place (a dict keyed by the owner's id,
  an entry dropped when its array is freed), and each remembers the clock of its recent writes,
  so `check` tells "written after the node was recorded" from the clocks alone: nothing is
  read from the saved arrays when a node is recorded.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from tinyformer import backend

__all__ = ["bump", "check", "clock", "label_saved", "owns_memory", "version"]

clock = 0  # in-place writes so far, all arrays together (read by autograd.py)


RECENT = 16  # writes whose clocks a counter keeps: enough to name the expected version exactly


class _Counter:
    """The version of one array's memory, the clocks of its recent writes and a description of
    the last one (for error messages)."""

    __slots__ = ("version", "clocks", "last_write", "ref")

    def __init__(self, owner: Any, key: int) -> None:
        self.version = 0
        self.clocks: deque[int] = deque(maxlen=RECENT)
        self.last_write = ""

        def forget(_: Any) -> None:  # the owner is being freed: its id may be reused
            if _counters.get(key) is self:
                del _counters[key]

        try:  # kept so that `forget` runs when the owner is freed
            self.ref = weakref.ref(owner, forget)
        except TypeError:  # an array type without weak references: the counter stays, and an
            self.ref = None  # array that later gets the owner's id starts from its count


_counters: dict[int, _Counter] = {}  # id(owner of the memory) -> its counter


def _owner(array: Any) -> Any:
    """The array that owns `array`'s memory: `array` itself or the base its view chain ends in
    (bytes, mmap and other buffers under an array have no dtype and end the chain)."""
    array = backend.host_memory(array)  # a new fake-device wrapper for every view: its host array
    base = getattr(array, "base", None)
    while base is not None and hasattr(base, "dtype"):
        array, base = base, getattr(base, "base", None)
    return array


def owns_memory(array: Any) -> bool:
    """Whether `array` owns its memory (is no view of another array's)."""
    return _owner(array) is backend.host_memory(array)


def version(array: Any) -> int:
    """How many in-place writes the memory of `array` has had (0 for None and numbers)."""
    counter = _counters.get(id(_owner(array))) if _counters else None
    return 0 if counter is None else counter.version


def bump(array: Any, write: str) -> int:
    """Record an in-place write to `array`'s memory; `write` says what wrote (for errors).
    Returns the new version."""
    global clock
    owner = _owner(array)
    counter = _counters.get(id(owner))
    if counter is None:
        counter = _counters[id(owner)] = _Counter(owner, id(owner))
    clock += 1
    counter.version += 1
    counter.clocks.append(clock)
    counter.last_write = write
    return counter.version


def label_saved(saved: tuple, inputs: list, outputs: tuple) -> list[str]:
    """What each saved array is to its op ("input 0", "a view of output 0", ...), for the error
    message. Costs a pass over the arrays, so the engine asks only under `detect_anomaly()`."""
    labels = []
    for a in saved:
        label = ""
        for kind, arrays in (("input", inputs), ("output", outputs)):
            for i, b in enumerate(arrays):
                if a is b:
                    label = label or f"{kind} {i}"
                elif hasattr(b, "dtype") and _owner(a) is _owner(b):
                    label = label or f"a view of {kind} {i}"
        labels.append(label)
    return labels


def check(node: Any) -> None:
    """RuntimeError if an array that `node` saved for its backward has been written in place
    since the node was recorded (at clock `node._clock`)."""
    for k, a in enumerate(node._saved):
        counter = _counters.get(id(_owner(a))) if a is not None else None
        if counter is None or counter.clocks[-1] <= node._clock:
            continue
        since = sum(t > node._clock for t in counter.clocks)
        # more writes since than a counter remembers: the version it had is at most this
        expected = f"{counter.version - since}" + (" or earlier" if since == RECENT else "")
        labels = node.__dict__.get("_saved_labels")
        what = labels[k] if labels and labels[k] else f"saved array {k}"
        find = " Run the forward under tf.autograd.detect_anomaly() to learn whether it is an "
        find = "" if labels else find + f"input or an output of {node.name}."
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{node.name} {what}, {a.dtype} of shape {tuple(a.shape)}] is at "
            f"version {counter.version}; expected version {expected} instead. The last write to "
            f"it: {counter.last_write}. Hint: {node.name} saved this array for its backward; "
            "write into a copy (x.clone()), use the out-of-place op (x = x + y, "
            f"x.masked_fill(...), tf.where(...)), or write after backward().{find}"
        )
