"""Module hooks, as PyTorch's: functions called around a module's forward, and when the
gradients of its inputs are computed (feature extraction, Grad-CAM, activation statistics).

    handle = model.layer4.register_forward_hook(lambda m, args, out: feats.append(out))
    handle.remove()

- forward pre-hooks `hook(module, args)` run before `forward` and may return new args;
- forward hooks `hook(module, args, output)` run after it and may return a new output
  (with_kwargs=True: `hook(module, args, kwargs)` returning (args, kwargs), and
  `hook(module, args, kwargs, output)`);
- full backward pre-hooks `hook(module, grad_output)` run when the gradients of the module's
  outputs are known and may return new ones; full backward hooks
  `hook(module, grad_input, grad_output)` run when the gradients of its positional tensor
  inputs are (None for an input that does not require one) and may return new ones.

The backward hooks work as PyTorch's do: the module's tensor inputs and outputs pass through
an identity op each way, whose backward sees the gradients. A module without hooks is called
straight, at no cost.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.hooks import RemovableHandle
from tinyformer.tensor import Tensor

__all__ = ["ModuleHooks", "call_with_hooks"]

_KINDS = ("forward_pre", "forward", "backward_pre", "backward")
_ids = itertools.count()


class ModuleHooks:
    """The `register_*hook` methods of `Module` (mixed in)."""

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """Call `hook(module, args)` (or `(module, args, kwargs)`) before each forward."""
        return _register(self, "forward_pre", hook, prepend, with_kwargs)

    def register_forward_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:  # fmt: skip
        """Call `hook(module, args, output)` (or `(module, args, kwargs, output)`) after each
        forward. `always_call` is accepted for PyTorch's signature (a forward that raises
        calls no hook here)."""
        return _register(self, "forward", hook, prepend, with_kwargs)

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """Call `hook(module, grad_output)` when the gradients of the outputs are known."""
        return _register(self, "backward_pre", hook, prepend, False)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """Call `hook(module, grad_input, grad_output)` when the gradients of the module's
        positional tensor inputs are known."""
        return _register(self, "backward", hook, prepend, False)

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        raise NotImplementedError(
            "register_backward_hook is deprecated in PyTorch and its gradients are not the "
            "module's; use register_full_backward_hook(hook), which takes the same function"
        )


def _register(
    module: Any, kind: str, hook: Callable, prepend: bool, with_kwargs: bool
) -> RemovableHandle:
    if not callable(hook):
        raise TypeError(f"register_{kind}_hook: expected a function, got {type(hook).__name__}")
    hooks = module.__dict__.get("_module_hooks")
    if hooks is None:
        hooks = {k: {} for k in _KINDS}
        object.__setattr__(module, "_module_hooks", hooks)
    table, key = hooks[kind], next(_ids)
    table[key] = (hook, with_kwargs)
    if prepend:
        for old in [k for k in table if k != key]:
            table[old] = table.pop(old)  # moved behind the new one, in their order
    return RemovableHandle(table, key)


def call_with_hooks(module: Any, args: tuple, kwargs: dict) -> Any:
    """`module.forward(*args, **kwargs)` with its hooks around it."""
    hooks = module._module_hooks
    for hook, with_kwargs in list(hooks["forward_pre"].values()):
        if with_kwargs:
            new = hook(module, args, kwargs)
            if new is not None:
                if not (isinstance(new, tuple) and len(new) == 2):
                    raise RuntimeError(
                        "a forward pre-hook with with_kwargs=True must return None or "
                        f"(args, kwargs), got {type(new).__name__}"
                    )
                args, kwargs = new
        else:
            new = hook(module, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
    state = None
    if hooks["backward"] or hooks["backward_pre"]:
        state = _State(module, args)
        args = state.wrap_inputs(args)
    output = module.forward(*args, **kwargs)
    for hook, with_kwargs in list(hooks["forward"].values()):
        new = hook(module, args, kwargs, output) if with_kwargs else hook(module, args, output)
        if new is not None:
            output = new
    return output if state is None else state.wrap_outputs(output)


class _State:
    """One call's backward-hook plumbing: which inputs went through the identity op, and the
    output gradients once backward has reached them."""

    def __init__(self, module: Any, args: tuple) -> None:
        self.module = module
        self.tensor_args = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        self.wrapped = [i for i in self.tensor_args if args[i].requires_grad]
        self.grad_output: tuple | None = None

    def wrap_inputs(self, args: tuple) -> tuple:
        if not self.wrapped:
            return args
        outs = _Inputs.apply(*(args[i] for i in self.wrapped), state=self)
        outs = outs if isinstance(outs, tuple) else (outs,)
        args = list(args)
        for i, t in zip(self.wrapped, outs):
            args[i] = t
        return tuple(args)

    def wrap_outputs(self, output: Any) -> Any:
        several = isinstance(output, (tuple, list))
        items = list(output) if several else [output]
        where = [i for i, o in enumerate(items) if isinstance(o, Tensor) and o.requires_grad]
        if not where:
            return output
        outs = _Outputs.apply(*(items[i] for i in where), state=self)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for i, t in zip(where, outs):
            items[i] = t
        if not several:
            return items[0]
        return type(output)(*items) if hasattr(output, "_fields") else type(output)(items)

    def call_backward_hooks(self, grads: list) -> list:
        """grads: one per wrapped input (arrays); the hooks see one per tensor argument."""
        by_arg = dict(zip(self.wrapped, grads))
        grad_input = tuple(
            Tensor._make(by_arg[i], None) if i in by_arg else None for i in self.tensor_args
        )
        for hook, _ in list(self.module._module_hooks["backward"].values()):
            new = hook(self.module, grad_input, self.grad_output)
            if new is not None:
                grad_input = _replacement("backward hook", new, grad_input)
        return [grad_input[self.tensor_args.index(i)] for i in self.wrapped]


def _replacement(what: str, new: Any, old: tuple) -> tuple:
    new = tuple(new) if isinstance(new, (tuple, list)) else (new,)
    if len(new) != len(old):
        raise RuntimeError(f"a {what} returned {len(new)} gradients where it was given {len(old)}")
    for n, o in zip(new, old):
        if n is not None and o is not None and tuple(n.shape) != tuple(o.shape):
            raise RuntimeError(
                f"a {what} returned a gradient of shape {tuple(n.shape)} for one of shape "
                f"{tuple(o.shape)}"
            )
    return new


def _views(arrays: tuple) -> Any:
    """The arrays as new views (the outputs of an identity op are not its inputs)."""
    views = tuple(a[...] for a in arrays)
    return views if len(views) > 1 else views[0]


def _data(g: Any) -> Any:
    return g.data if isinstance(g, Tensor) else g


class _Identity(Function):
    """The identity, remembering the call's `_State` for its backward."""

    @staticmethod
    def forward(ctx, *arrays, state):
        ctx.state = state
        return _views(arrays)


class _Inputs(_Identity):
    """Identity on the module's inputs; its backward is where the input gradients are known."""

    @staticmethod
    def backward(ctx, *gys):
        grads = ctx.state.call_backward_hooks(list(gys))
        out = tuple(None if g is None else _data(g) for g in grads)
        return out if len(out) > 1 else out[0]


class _Outputs(_Identity):
    """Identity on the module's outputs; its backward is where their gradients are known."""

    @staticmethod
    def backward(ctx, *gys):
        state = ctx.state
        grad_output = tuple(Tensor._make(g, None) for g in gys)
        for hook, _ in list(state.module._module_hooks["backward_pre"].values()):
            new = hook(state.module, grad_output)
            if new is not None:
                grad_output = _replacement("backward pre-hook", new, grad_output)
        state.grad_output = grad_output
        if not state.wrapped:  # no input wants a gradient: PyTorch calls the hooks now
            state.call_backward_hooks([])
        xp = backend.get_array_module(gys[0])
        out = tuple(
            xp.zeros_like(g) if new is None else _data(new) for g, new in zip(gys, grad_output)
        )
        return out if len(out) > 1 else out[0]
