"""Which module made each node of a graph: `with viz.trace(model) as tr: loss = ...`.

Inside the block every module of `model` runs its forward through a small wrapper, set as an
attribute of that module object alone and removed when the block ends: no class and no global
is touched, and outside a trace nothing costs anything. When a module's forward returns, the
wrapper walks the graph back from its outputs, stopping at its inputs' nodes, and gives the
module's name to every node met that no inner module has claimed. Inner modules return first,
so each node gets the innermost module that was running when it was made (`h.0.attn.c_attn`
for the Linear's op, `h.0.attn` for the reshape between two Linears, `h.0` for the residual
add).

A tensor that reaches a module some other way than as an argument (a stored attribute) is not
an input of the walk: nodes behind it may be claimed by the module that used it. Models here
pass activations as arguments, so this does not arise in them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from tinyformer.engine import Context
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["Trace", "trace"]


class Trace:
    """The module name of every node made while tracing, and the model's parameter names."""

    def __init__(self, model: Module) -> None:
        if not isinstance(model, Module):
            raise TypeError(f"trace: model must be a tinyformer Module, got {type(model).__name__}")
        self.model = model
        self.modules: weakref.WeakKeyDictionary[Context, str] = weakref.WeakKeyDictionary()
        self._wrapped: list[tuple[Module, Any]] = []

    def module_of(self, node: Context) -> str | None:
        """The dotted name of the module that made `node` ("" for the model itself), or None
        when it was made outside the model's forward."""
        return self.modules.get(node)

    def params(self) -> dict[str, Parameter]:
        return dict(self.model.named_parameters())

    def __enter__(self) -> Trace:
        for name, module in self.model.named_modules():
            own = module.__dict__.get("forward")  # a forward set on the object itself, if any
            self._wrapped.append((module, own))
            object.__setattr__(module, "forward", self._wrap(name, module.forward))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, own in reversed(self._wrapped):
            del module.__dict__["forward"]
            if own is not None:
                object.__setattr__(module, "forward", own)
        self._wrapped.clear()

    def _wrap(self, name: str, forward: Any) -> Any:
        def traced_forward(*args: Any, **kwargs: Any) -> Any:
            out = forward(*args, **kwargs)
            stop = {id(t.grad_fn) for t in _tensors((args, kwargs)) if t.grad_fn is not None}
            self._claim(name, [t.grad_fn for t in _tensors(out) if t.grad_fn is not None], stop)
            return out

        return traced_forward

    def _claim(self, name: str, roots: list[Context], stop: set[int]) -> None:
        seen: set[int] = set()
        stack = list(roots)
        while stack:
            node = stack.pop()
            if id(node) in seen or id(node) in stop:
                continue
            seen.add(id(node))
            self.modules.setdefault(node, name)
            stack.extend(p for p in node.parents if type(p) is Context)


def trace(model: Module) -> Trace:
    """Record which module of `model` made each graph node inside the `with` block.

    Example:
        with viz.trace(model) as tr:
            logits, loss = model(idx, targets)
        viz.graph(loss, trace=tr).collapse(depth=1)
    """
    return Trace(model)


def _tensors(value: Any) -> Iterator[Tensor]:
    """The tensors in a forward's arguments or result (nested tuples, lists and dicts)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, Tensor):
            yield v
        elif isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
