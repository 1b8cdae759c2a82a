"""Hooks, as PyTorch's: functions the engine or a module calls at a given moment, each
registration undone by `handle.remove()`.

Tensor hooks (`t.register_hook(fn)`) see a tensor's gradient as backward computes it and may
replace it: a leaf's before it is added into `.grad`, a non-leaf's (kept on its node, by output)
before it flows on into the node's backward. Module hooks are in `tinyformer/nn/hooks.py`.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, MutableSequence
from typing import Any

__all__ = ["RemovableHandle", "run_grad_hooks"]


class RemovableHandle:
    """What a `register_*hook` call returns: `remove()` takes the hook out (twice is fine),
    and `with handle:` removes it at the end of the block."""

    def __init__(self, hooks: MutableSequence | MutableMapping, key: Any) -> None:
        self._hooks, self._key = hooks, key

    def remove(self) -> None:
        if isinstance(self._hooks, MutableMapping):
            self._hooks.pop(self._key, None)
        elif self._key in self._hooks:
            self._hooks.remove(self._key)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def run_grad_hooks(hooks: list[Callable], g: Any) -> Any:
    """`g` (an array) through each hook in turn, as a Tensor; a returned tensor (or array)
    replaces it and must keep its shape."""
    from tinyformer.tensor import Tensor

    for hook in list(hooks):  # a hook may remove itself
        out = hook(Tensor._make(g, None))
        if out is None:
            continue
        new = out.data if isinstance(out, Tensor) else out
        if getattr(new, "shape", None) != g.shape:
            raise RuntimeError(
                f"a gradient hook returned shape {getattr(new, 'shape', type(new).__name__)} "
                f"for a gradient of shape {g.shape}: a hook may change the values, not the shape"
            )
        g = new.astype(g.dtype, copy=False)
    return g
