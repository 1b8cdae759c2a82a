"""How a gradient reaches a leaf's `.grad` during backward (tinyformer/engine.py walks the
graph; this is where its edges end): the first gradient taken as it is when no one else can see
its memory, later ones added, and the gradients of leaves with `register_hook`s held until the
backward ends, so that each hook sees the whole gradient once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyformer import backend
from tinyformer.inplace_array import with_inplace

if TYPE_CHECKING:
    from tinyformer.engine import Variable

__all__ = ["accumulate_leaf", "can_take", "hold", "owner"]


def owner(g: Any) -> Any:
    """The array that owns g's memory: g itself, or the array g is a view of."""
    a = backend.host_memory(g)
    base = getattr(a, "base", None)
    return a if base is None else base


def can_take(g: Any, taken: dict[int, Any]) -> bool:
    """Whether a leaf's first gradient may be `g` itself rather than a copy of it (a copy is a
    launch on a GPU, one per parameter and step): g must be writable and cover all the memory of
    the array that owns it, and no root gradient (the caller's) or other leaf's gradient of
    this backward may share that memory. `taken` maps the owners seen so far by id and keeps
    them alive: a freed owner's id can come back on a new array, which would then be copied
    for nothing (a launch more on a GPU, on some runs and not others)."""
    base = owner(g)
    a = backend.host_memory(g)
    if id(base) in taken or type(base) is not type(a) or base.nbytes != a.nbytes:
        return False
    if not (a.flags.c_contiguous and getattr(a.flags, "writeable", True)):  # CuPy: no flag
        return False
    taken[id(base)] = base
    return True


def accumulate_leaf(
    leaf: Variable, g: Any, captured: dict[int, Any] | None, taken: dict[int, Any] | None = None
) -> None:
    """Add g into leaf.grad (or, for `grad()`, into `captured`), then call its post-accumulate
    hooks."""
    if captured is not None:  # grad(): collect instead of touching .grad
        key = id(leaf)
        if key in captured:
            captured[key] = g if captured[key] is None else captured[key] + g
        return
    if leaf.grad is not None:
        leaf.grad = with_inplace(leaf.grad + g)
    else:  # a copy unless g's memory is g's alone (`can_take`): g may be shared with another
        # input, be the caller's root gradient, or be a read-only broadcast view.
        leaf.grad = with_inplace(g if taken is not None and can_take(g, taken) else g.copy())
    for hook in leaf._hooks or ():
        hook(leaf)


def hold(hooked: dict[int, list], leaf: Variable, g: Any) -> None:
    """Add g to the gradient held for a hooked leaf until the end of the backward."""
    entry = hooked.get(id(leaf))
    if entry is None:
        hooked[id(leaf)] = [leaf, g]
    else:
        entry[1] = entry[1] + g
