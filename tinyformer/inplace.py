"""In-place operations on a Tensor, as PyTorch spells them: `copy_`, `zero_`, `fill_`,
`normal_`, `uniform_`, `masked_fill_`, `scatter_`, `index_fill_`, `clamp_`, `add_`, `sub_`,
`mul_`, `div_`, `t[index] = value` and `x += y` (also -=, *=, /=).

Each writes into the tensor's array (shared with its views), bumps the memory's version
counter (`t._version`; see `tinyformer/versions.py`) and returns the tensor itself
(`__setitem__` returns nothing). The rules follow PyTorch's:

- under `no_grad()`, and where nothing requires grad, the write is plain;
- a leaf that requires grad (a parameter) may be written only under `no_grad()`;
- otherwise, when the tensor has a history (an op's output) or the value requires grad
  (`out[:, i] = h` in an RNN loop), the write is recorded in the graph: the tensor's history is
  rebased onto an IndexPut node (`tinyformer/ops/getitem.py`), whose backward sends the
  gradient of the written positions to the value and the rest to the old history. `add_` and
  friends record `x[...] = x + y`. Two limits: the tensor must own its memory (PyTorch also
  rebases the base of a view; here a write into a view that must be recorded is refused), and
  views of the tensor taken before the write keep their old history (take them after).

If autograd saved the array for a backward pass, the version counter makes that `backward()`
fail with an error instead of computing a wrong gradient.

`x += y` on a tensor with a history, or with a `y` that requires grad, is Python's `x = x + y`
(a new tensor bound to the name) rather than a recorded write: the same values and gradients
for the code that reads `x` afterwards, without the limits above.

Values: a Tensor must be on the tensor's device (as for every op); arrays and numbers are data
and are moved there. `copy_` broadcasts its source to the tensor's shape and casts it to the
tensor's dtype.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyformer import backend, grad_mode, versions
from tinyformer import random as _random
from tinyformer.indexing import normalize_index

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = ["InPlaceOps"]


class InPlaceOps:
    """The in-place methods of `Tensor` (which inherits them). A recorded write goes through
    `self._index_put(index, value)`, which `Tensor` defines (it calls the op)."""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    @property
    def _version(self) -> int:
        """How many in-place writes this tensor's memory has had (shared with its views)."""
        return versions.version(self.data)

    def copy_(self, src: Any) -> Tensor:
        """Copy `src` (a Tensor, an array or a number) into this tensor: broadcast to its shape,
        cast to its dtype."""
        self._check_leaf("copy_")
        self._check_fits(
            "copy_", "the source", src.shape if hasattr(src, "shape") else np.shape(src)
        )
        return self._put("copy_", ..., src)

    def zero_(self) -> Tensor:
        """Set every element to 0."""
        self._check_leaf("zero_")
        if self._records():
            return self._put("zero_", ..., 0)
        return self._write("zero_", lambda a: a.fill(0))

    def fill_(self, value: Any) -> Tensor:
        """Set every element to `value` (a number or a one-element tensor)."""
        self._check_leaf("fill_")
        if getattr(value, "size", 1) != 1:
            raise ValueError(f"fill_: takes a number, got a value of shape {value.shape}")
        return self._put("fill_", ..., value)

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Tensor:
        """Fill with samples of N(mean, std^2) from tinyformer's generator (`manual_seed`)."""
        self._check_leaf("normal_")
        self._need_float("normal_")
        draw = _random.generator().standard_normal(self.shape)
        return self._write_host("normal_", mean + std * draw)

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> Tensor:
        """Fill with samples of U[a, b) from tinyformer's generator (`manual_seed`)."""
        self._check_leaf("uniform_")
        self._need_float("uniform_")
        return self._write_host("uniform_", _random.generator().uniform(a, b, self.shape))

    def masked_fill_(self, mask: Any, value: Any) -> Tensor:
        """Set the elements where `mask` (boolean, broadcasting to this shape) is true."""
        self._check_leaf("masked_fill_")
        mask = self._value("masked_fill_", mask)
        if getattr(mask, "dtype", None) != np.bool_:
            raise TypeError(
                f"masked_fill_: mask must be boolean, got {getattr(mask, 'dtype', mask)}"
            )
        self._check_fits("masked_fill_", "mask", mask.shape)
        xp = backend.get_array_module(self.data)
        if self._records(value):
            return self._put("masked_fill_", xp.broadcast_to(mask, self.shape), value)
        fill = xp.asarray(self._value("masked_fill_", value), self.dtype)
        return self._write("masked_fill_", lambda a: a.__setitem__(..., xp.where(mask, fill, a)))

    def scatter_(
        self, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
    ) -> Tensor:
        """Write `src` (a tensor, or a number) at `index` along `dim` (see `Tensor.scatter`)."""
        self._check_leaf("scatter_")
        return self._replace("scatter_", self.scatter(dim, index, src, value=value, reduce=reduce))

    def index_fill_(self, dim: int, index: Any, value: Any) -> Tensor:
        """Set the slices `index` (integers) along `dim` to `value`."""
        self._check_leaf("index_fill_")
        return self._replace("index_fill_", self.index_fill(dim, index, value))

    def clamp_(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """Clamp every element into [min, max] (either bound may be None)."""
        self._check_leaf("clamp_")
        return self._replace("clamp_", self.clamp(min, max))

    clip_ = clamp_

    def add_(self, other: Any, *, alpha: float = 1) -> Tensor:
        """self += alpha * other (`other` broadcasts to this shape)."""
        return self._arithmetic("add_", operator.add, operator.iadd, other, alpha)

    def sub_(self, other: Any, *, alpha: float = 1) -> Tensor:
        """self -= alpha * other."""
        return self._arithmetic("sub_", operator.sub, operator.isub, other, alpha)

    def mul_(self, other: Any) -> Tensor:
        """self *= other."""
        return self._arithmetic("mul_", operator.mul, operator.imul, other)

    def div_(self, other: Any) -> Tensor:
        """self /= other (a floating tensor: integer division in place is refused, as in
        PyTorch)."""
        return self._arithmetic("div_", operator.truediv, operator.itruediv, other)

    # `x += y` and friends: in place where PyTorch writes in place and tinyformer may (see the
    # rules above); on an op's output that requires grad (`x += pos` inside a forward), or with
    # a value that requires grad, Python's `x = x + y` instead, which PyTorch's recorded write
    # amounts to for the code that reads `x` afterwards.
    def __iadd__(self, other: Any) -> Tensor:
        return self._augmented(self.add_, other, operator.add)

    def __isub__(self, other: Any) -> Tensor:
        return self._augmented(self.sub_, other, operator.sub)

    def __imul__(self, other: Any) -> Tensor:
        return self._augmented(self.mul_, other, operator.mul)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._augmented(self.div_, other, operator.truediv)

    def _augmented(self, write: Any, other: Any, op: Any) -> Tensor:
        if self._records(other) and not (self.requires_grad and self.grad_fn is None):
            return op(self, other)
        return write(other)  # a parameter with grad mode on is refused there, as in PyTorch

    def __setitem__(self, index: Any, value: Any) -> None:
        """`t[index] = value` with any index `t[index]` takes; `value` broadcasts to the part."""
        self._check_leaf("__setitem__")
        self._put("__setitem__", normalize_index(self.data, index, "__setitem__"), value)

    # -- helpers --------------------------------------------------------------------------------

    def _records(self, value: Any = None) -> bool:
        """Whether a write into this tensor goes into the graph: grad mode is on, and this
        tensor has a history or `value` requires grad."""
        return grad_mode._grad_enabled and (
            self.grad_fn is not None or bool(getattr(value, "requires_grad", False))
        )

    def _arithmetic(
        self, op: str, out_of_place: Any, in_place: Any, other: Any, alpha: float = 1
    ) -> Tensor:
        """`op` (add_, ...): a recorded `self[...] = self op other`, or a plain write."""
        self._check_leaf(op)
        if self._records(other):
            if alpha != 1:
                other = other * alpha
            # Mul and Div save their inputs, which the write then overwrites: give them a copy.
            old = self.clone() if op in ("mul_", "div_") else self
            return self._put(op, ..., out_of_place(old, other))
        other = self._value(op, other)
        other = other if alpha == 1 else other * alpha
        return self._write(op, lambda a: in_place(a, other))

    def _replace(self, op: str, new: Tensor) -> Tensor:
        """Write `new`, an op's result of this tensor's shape, over this tensor: recorded when
        `new` carries a gradient (from this tensor's history or from the values written)."""
        if self._records(new):
            return self._put(op, ..., new)
        return self._write(op, lambda a: a.__setitem__(..., new.data))

    def _value(self, op: str, value: Any) -> Any:
        """`value` as data to write into this tensor: a Tensor's array (on this device), other
        data moved to this device."""
        if isinstance(value, InPlaceOps):  # a Tensor: every Tensor is an InPlaceOps
            backend.check_same_device(op, self.data, value.data)
            return value.data
        if isinstance(value, (list, tuple, np.ndarray)) or backend.is_device_array(value):
            return backend.to_device(value, self.device)
        return value  # a number

    def _check_leaf(self, op: str) -> None:
        """RuntimeError for a write into a leaf that requires grad with grad mode on."""
        if self.requires_grad and self.grad_fn is None and grad_mode._grad_enabled:
            raise RuntimeError(
                f"{op}: a leaf Variable that requires grad is being used in an in-place "
                f"operation (shape {self.shape}). Wrap the write in `with tf.no_grad():` "
                "(as optimizers and initialisers do), or write into a copy (x.detach() "
                "shares memory, x.clone() does not)."
            )

    def _check_fits(self, op: str, what: str, shape: tuple) -> None:
        """ValueError unless `shape` broadcasts to this tensor's shape (a write cannot grow it)."""
        try:
            fits = np.broadcast_shapes(shape, self.shape) == self.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"{op}: {what} of shape {tuple(shape)} does not broadcast to the tensor's shape "
                f"{self.shape}"
            )

    def _need_float(self, op: str) -> None:
        if self.dtype.kind != "f":
            raise TypeError(f"{op}: fills floating-point tensors, this one is {self.dtype}")

    def _write_host(self, op: str, draw: np.ndarray) -> Tensor:
        # Drawn on the host and moved, as creation.py does: a seed gives the same numbers on
        # every device.
        return self._put(op, ..., backend.to_device(draw.astype(self.dtype), self.device))

    def _put(self, op: str, index: Any, value: Any) -> Tensor:
        """`self[index] = value` for `op`: recorded in the graph when it must be (`_records`),
        else a plain write. `index` is normalized."""
        if not self._records(value):
            value = self._value(op, value)
            return self._write(op, lambda a: a.__setitem__(index, value))
        if self.dtype.kind != "f":
            raise TypeError(
                f"{op}: the value requires grad, and this tensor is {self.dtype}: a write into "
                "it cannot carry a gradient. Write value.detach(), or into a float tensor."
            )
        if not versions.owns_memory(self.data):
            raise RuntimeError(
                f"{op}: this tensor (shape {self.shape}) is a view of another tensor's memory, "
                "and a write into it must be recorded in the graph (it has a history, or the "
                "value requires grad). tinyformer records writes into tensors that own their "
                "memory only (PyTorch also rebases the view's base): write into a copy, "
                "x = x.clone(), or into the base tensor."
            )
        if isinstance(value, InPlaceOps):
            backend.check_same_device(op, self.data, value.data)
        else:
            value = self._value(op, value)
        try:
            node_output = self._index_put(index, value)
        except ValueError as e:  # shapes that do not fit
            raise ValueError(f"{op}: {e} (tensor of shape {self.shape}, {self.dtype})") from e
        self.grad_fn, self._output = node_output.grad_fn, node_output._output
        self._requires_grad = node_output.requires_grad
        self._bump(op)
        return self

    def _write(self, op: str, write: Any) -> Tensor:
        """Run `write(array)` on this tensor's array (a plain write) and bump the version."""
        try:
            write(self.data)
        except ValueError as e:  # a read-only array (expand's view), shapes that do not fit
            raise ValueError(f"{op}: {e} (tensor of shape {self.shape}, {self.dtype})") from e
        except TypeError as e:  # NumPy's casting errors: float into int with add_, ...
            raise TypeError(f"{op}: {e} (tensor of shape {self.shape}, {self.dtype})") from e
        self._bump(op)
        return self

    def _bump(self, op: str) -> None:
        write_name = "x[index] = value" if op == "__setitem__" else f"{op}()"
        versions.bump(self.data, f"{write_name} on a tensor of shape {self.shape}")
