"""`Module` and `Parameter`, shaped like PyTorch's so that what students learn here transfers.

A module is an object whose attributes may be parameters, buffers (tensors that are state but
not trained, such as a causal mask or running statistics; an array given as a buffer becomes a
tensor, as in PyTorch) or other modules. Assigning one registers
it; `named_parameters()` then walks the tree and names every parameter by its dotted path
(`h.0.attn.c_attn.weight`), which is also its key in `state_dict()`.

A parameter shared by two modules (GPT's token embedding and its LM head) is yielded once by
`parameters()`, so an optimizer updates it once, but appears under both names in `state_dict()`,
as in PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from tinyformer import backend, versions
from tinyformer.inplace_array import with_inplace
from tinyformer.nn.hooks import ModuleHooks, call_with_hooks
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = ["Module", "Parameter", "StateDictError"]


_DATA = Tensor.__dict__["data"]  # the slot that holds every tensor's array


class Parameter(Tensor):
    """A tensor that is a trainable weight of a module: it always requires a gradient.

    Its `.data` is an `InPlaceArray` (tinyformer/inplace_array.py): the NumPy array, which also
    takes PyTorch's in-place calls, as `self.encoder.weight.data.uniform_(-r, r)` in pasted
    code. Whatever array is stored (`module.to()`, `p.data = new`) is viewed that way."""

    __slots__ = ()

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        super().__init__(data.data if isinstance(data, Tensor) else data, requires_grad)

    @property  # type: ignore[override]
    def data(self) -> Any:
        return _DATA.__get__(self)

    @data.setter
    def data(self, value: Any) -> None:
        _DATA.__set__(self, with_inplace(value))

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()


def _buffer(value: Any) -> Tensor | None:
    """A buffer's value as a Tensor: a Tensor as it is, an array (or Python data) wrapped."""
    if value is None or isinstance(value, Tensor):
        return value
    return Tensor(value)


class StateDictError(KeyError):
    """`load_state_dict` was given keys or shapes that do not fit the module."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Module(ModuleHooks):
    """Base class of every layer and model: subclasses set attributes in `__init__` and define
    `forward`; calling the module calls `forward` (and its hooks: tinyformer/nn/hooks.py)."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    # -- registration ---------------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() has run: call "
                "super().__init__() first in the subclass's __init__"
            )
        if name in self._buffers and not isinstance(value, (Parameter, Module)):
            # `self.mask = self.mask[..., :T]` keeps a buffer a buffer (and in state_dict), as
            # in PyTorch; before, it silently became a plain attribute.
            self._buffers[name] = _buffer(value)
            return
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self.__dict__.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:  # only called when normal lookup fails
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table, {})
            if name in entries:
                return entries[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register `param` as `name`; None declares an absent parameter (like a missing bias)."""
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name: str, value: Any, persistent: bool = True) -> None:
        """Keep `value` (a tensor, or an array, which becomes one) as state that is not
        trained, read back as a Tensor (`self.pe.requires_grad_(False)`); `persistent` ones
        are in `state_dict()`. A tensor is kept as it is, as in PyTorch (not copied)."""
        self.__dict__.pop(name, None)
        self._buffers[name] = _buffer(value)
        if not persistent:
            self._non_persistent.add(name)
        else:
            self._non_persistent.discard(name)

    # -- traversal ------------------------------------------------------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and all below it, depth first, each once, with dotted names."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{n}" if name else n, m) for n, m in module._modules.items()]
            stack.extend(reversed([(n, m) for n, m in children if m is not None]))

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def _every_path(self) -> Iterator[tuple[str, Module]]:
        """This module and all below it under every dotted name that reaches them (a shared
        submodule once per name: what `state_dict` lists, as PyTorch's), depth first."""
        stack = [("", self, ())]
        while stack:
            name, module, above = stack.pop()
            yield name, module
            above = (*above, id(module))
            children = [
                (f"{name}.{n}" if name else n, m, above)
                for n, m in module._modules.items()
                if m is not None and id(m) not in above  # a cycle would never end
            ]
            stack.extend(reversed(children))

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """Every parameter once (a shared one under its first name), with dotted names."""
        seen: set[int] = set()
        for module_name, module in self.named_modules(prefix):
            for name, param in module._parameters.items():
                if param is None or id(param) in seen:
                    continue
                seen.add(id(param))
                yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self) -> Iterator[Parameter]:
        for _, param in self.named_parameters():
            yield param

    def named_buffers(self) -> Iterator[tuple[str, Tensor]]:
        for module_name, module in self.named_modules():
            for name, buf in module._buffers.items():
                if buf is not None:
                    yield (f"{module_name}.{name}" if module_name else name), buf

    def buffers(self) -> Iterator[Tensor]:
        for _, buf in self.named_buffers():
            yield buf

    def num_parameters(self, trainable_only: bool = False) -> int:
        """The number of parameter elements (shared parameters counted once)."""
        return sum(p.size for p in self.parameters() if p.requires_grad or not trainable_only)

    # -- state ----------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Tensor]:
        """Every parameter and persistent buffer, by dotted name (shared ones, and those of a
        shared submodule, under every name that reaches them), as detached Tensors that share
        memory with the module, as in PyTorch: `with tf.no_grad(): sd[k].copy_(w)` changes
        the module's weight. To keep values while the module trains on (a checkpoint), copy
        them to the host: `{k: backend.host_copy(v.data) for k, v in sd.items()}`."""
        state: dict[str, Tensor] = {}
        for module_name, module in self._every_path():
            dot = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    state[dot + name] = Tensor._make(param.data, None)
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent:
                    state[dot + name] = Tensor._make(buf.data, None)
        return state

    def _state_slots(self) -> dict[str, tuple[Module, str, str]]:
        slots = {}
        for module_name, module in self._every_path():
            dot = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    slots[dot + name] = (module, name, "param")
            for name, buf in module._buffers.items():
                if buf is not None and name not in module._non_persistent:
                    slots[dot + name] = (module, name, "buffer")
        return slots

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Copy values (Tensors or arrays, on any device) from `state_dict` into this module's
        parameters and buffers, in place; each copy counts as an in-place write (`_version`).

        Raises StateDictError naming every missing or unexpected key (when `strict`), every
        shape mismatch and every array that is not of real numbers (always); nothing is modified
        unless the whole dict fits. A `state_dict` that is not a mapping is a TypeError.
        """
        where = f"load_state_dict into {type(self).__name__}"
        if not isinstance(state_dict, Mapping):  # a list would pass the key checks below
            raise TypeError(
                f"{where}: expected a mapping of names to arrays (a state_dict), got "
                f"{type(state_dict).__name__}"
            )
        slots = self._state_slots()
        missing = sorted(set(slots) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(slots))
        problems = []
        if strict and missing:
            problems.append(f"missing keys: {', '.join(missing)}")
        if strict and unexpected:
            problems.append(f"unexpected keys: {', '.join(unexpected)}")
        arrays = {}
        for key, (module, name, kind) in slots.items():
            if key not in state_dict:
                continue
            value = array_of(state_dict[key])
            target = (module._parameters if kind == "param" else module._buffers)[name].data
            if value.dtype.kind not in "biuf":  # complex would lose its imaginary part silently
                problems.append(f"{key} has dtype {value.dtype}, not real numbers")
            elif value.shape != target.shape:
                problems.append(
                    f"shape mismatch for {key}: checkpoint has {value.shape}, "
                    f"the model has {target.shape}"
                )
            arrays[key] = (target, value)
        if problems:
            raise StateDictError(f"{where}: " + "; ".join(problems))
        for key, (target, value) in arrays.items():
            # in place, on the module's device: optimizers keep pointing at the same arrays
            target[...] = backend.to_device(value, backend.device_of(target))
            versions.bump(target, f"load_state_dict ({key})")

    # -- modes and helpers ----------------------------------------------------------------------

    def train(self, mode: bool = True) -> Module:
        """Set training mode (dropout active) on this module and all below it."""
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for param in self.parameters():
            if set_to_none or param.grad is None:
                param.grad = None
            else:
                param.grad[...] = 0

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call `fn` on every submodule (children first) and on this module, as in PyTorch."""
        for module in reversed(list(self.modules())):
            fn(module)
        return self

    def to(self, *args: Any, dtype: Any = None, device: Any = None) -> Module:
        """Move every parameter and buffer to `device` and/or convert the floating ones to
        `dtype`, in place (`model.to("cuda")`, `model.to(np.float64)` for gradient checks,
        `model.to(device, dtype)`), as PyTorch's. Parameters stay the same objects, so an
        optimizer built before still holds them; its state follows at its next step. A dtype
        change drops gradients."""
        where = f"{type(self).__name__}.to"
        for arg in args:
            if backend.is_device_spec(arg):
                device = arg
            else:
                dtype = arg
        if dtype is not None:
            try:
                kind = np.dtype(dtype).kind
            except TypeError:
                raise TypeError(
                    f"{where}: takes a device ('cpu', 'cuda') or a floating dtype such as "
                    f"'float64', got {dtype!r}"
                ) from None
            if kind != "f":  # integer weights would have no gradients to train
                raise TypeError(f"{where}: dtype must be floating, got {np.dtype(dtype)}")
        place = backend.device(device) if device is not None else None

        def convert(a: Any) -> Any:
            if place is not None:
                a = backend.to_device(a, place)
            if dtype is not None and a.dtype.kind == "f":
                a = a.astype(dtype, copy=False)
            return a

        for param in self.parameters():
            param.data = convert(param.data)
            if dtype is not None or param.grad is None:
                param.grad = None
            else:
                param.grad = backend.to_device(param.grad, place)
        for module in self.modules():
            for buf in module._buffers.values():
                if buf is not None:  # the same Tensor, as a parameter stays the same object
                    buf.data = convert(buf.data)
        return self

    def double(self) -> Module:
        """Floating parameters and buffers as float64 (`model.to(np.float64)`)."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Floating parameters and buffers as float32."""
        return self.to(np.float32)

    def half(self) -> Module:
        """Floating parameters and buffers as float16."""
        return self.to(np.float16)

    def cuda(self, device: int | None = None) -> Module:
        """`module.to("cuda")` (or `"cuda:<device>"`)."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def cpu(self) -> Module:
        """`module.to("cpu")`."""
        return self.to("cpu")

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for param in self.parameters():
            param.requires_grad = requires_grad
        return self

    # -- calling and printing -------------------------------------------------------------------

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.__dict__.get("_module_hooks") is None:
            return self.forward(*args, **kwargs)
        return call_with_hooks(self, args, kwargs)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = []
        for name, module in self._modules.items():
            child = repr(module).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child}")
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")
