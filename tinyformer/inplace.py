"""In-place operations on a Tensor, as PyTorch spells them: `copy_`, `zero_`, `fill_`,
`normal_`, `uniform_`, `masked_fill_`, `add_`, `sub_`, `mul_`, `div_`, `t[index] = value` and
`x += y` (also -=, *=, /=).

Each writes into the tensor's array (shared with its views), bumps the memory's version
counter (`t._version`; see `tinyformer/versions.py`) and returns the tensor itself
(`__setitem__` returns nothing). The rules follow PyTorch's, with one difference:

- under `no_grad()`, and on tensors that do not require grad, everything is allowed;
- a leaf that requires grad (a parameter) may be written only under `no_grad()`;
- a tensor that requires grad and has a `grad_fn` (an op's output) is refused: PyTorch
  records the write in the graph, tinyformer does not, so the out-of-place form is the way;
- a value that requires grad written into a tensor with grad mode on is refused too: the
  write is not recorded, so its gradient would be lost.

If autograd saved the array for a backward pass, the version counter makes that `backward()`
fail with an error instead of computing a wrong gradient.

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

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = ["InPlaceOps"]


class InPlaceOps:
    """The in-place methods of `Tensor` (which inherits them)."""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    @property
    def _version(self) -> int:
        """How many in-place writes this tensor's memory has had (shared with its views)."""
        return versions.version(self.data)

    def copy_(self, src: Any) -> Tensor:
        """Copy `src` (a Tensor, an array or a number) into this tensor: broadcast to its shape,
        cast to its dtype."""
        value = self._value("copy_", src)
        self._check_fits("copy_", "the source", getattr(value, "shape", ()))
        return self._write("copy_", lambda a: a.__setitem__(..., value))

    def zero_(self) -> Tensor:
        """Set every element to 0."""
        return self._write("zero_", lambda a: a.fill(0))

    def fill_(self, value: Any) -> Tensor:
        """Set every element to `value` (a number or a one-element tensor)."""
        value = self._value("fill_", value)
        if getattr(value, "size", 1) != 1:
            raise ValueError(f"fill_: takes a number, got a value of shape {value.shape}")
        return self._write("fill_", lambda a: a.__setitem__(..., value))

    def normal_(self, mean: float = 0.0, std: float = 1.0) -> Tensor:
        """Fill with samples of N(mean, std^2) from tinyformer's generator (`manual_seed`)."""
        self._need_float("normal_")
        draw = _random.generator().standard_normal(self.shape)
        return self._write_host("normal_", mean + std * draw)

    def uniform_(self, a: float = 0.0, b: float = 1.0) -> Tensor:
        """Fill with samples of U[a, b) from tinyformer's generator (`manual_seed`)."""
        self._need_float("uniform_")
        return self._write_host("uniform_", _random.generator().uniform(a, b, self.shape))

    def masked_fill_(self, mask: Any, value: Any) -> Tensor:
        """Set the elements where `mask` (boolean, broadcasting to this shape) is true."""
        mask = self._value("masked_fill_", mask)
        value = self._value("masked_fill_", value)
        if getattr(mask, "dtype", None) != np.bool_:
            raise TypeError(
                f"masked_fill_: mask must be boolean, got {getattr(mask, 'dtype', mask)}"
            )
        self._check_fits("masked_fill_", "mask", mask.shape)
        xp = backend.get_array_module(self.data)
        fill = xp.asarray(value, self.dtype)
        return self._write("masked_fill_", lambda a: a.__setitem__(..., xp.where(mask, fill, a)))

    def add_(self, other: Any, *, alpha: float = 1) -> Tensor:
        """self += alpha * other (`other` broadcasts to this shape)."""
        other = self._value("add_", other)
        other = other if alpha == 1 else other * alpha
        return self._write("add_", lambda a: operator.iadd(a, other))

    def sub_(self, other: Any, *, alpha: float = 1) -> Tensor:
        """self -= alpha * other."""
        other = self._value("sub_", other)
        other = other if alpha == 1 else other * alpha
        return self._write("sub_", lambda a: operator.isub(a, other))

    def mul_(self, other: Any) -> Tensor:
        """self *= other."""
        other = self._value("mul_", other)
        return self._write("mul_", lambda a: operator.imul(a, other))

    def div_(self, other: Any) -> Tensor:
        """self /= other (a floating tensor: integer division in place is refused, as in
        PyTorch)."""
        other = self._value("div_", other)
        return self._write("div_", lambda a: operator.itruediv(a, other))

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
        recording = grad_mode._grad_enabled and (
            self.grad_fn is not None or getattr(other, "requires_grad", False)
        )
        if recording and not (self.requires_grad and self.grad_fn is None):
            return op(self, other)
        return write(other)  # a parameter with grad mode on is refused there, as in PyTorch

    def __setitem__(self, index: Any, value: Any) -> None:
        """`t[index] = value` with any index `t[index]` takes; `value` broadcasts to the part."""
        from tinyformer.ops.getitem import _normalize_index  # the ops import the tensor module

        index = _normalize_index(self, index)
        value = self._value("__setitem__", value)
        self._write("__setitem__", lambda a: a.__setitem__(index, value))

    # -- helpers --------------------------------------------------------------------------------

    def _value(self, op: str, value: Any) -> Any:
        """`value` as something to write into this tensor: a Tensor's array (on this device),
        other data moved to this device. Refuses a value whose gradient the write would drop."""
        if isinstance(value, InPlaceOps):  # a Tensor: every Tensor is an InPlaceOps
            if value.requires_grad and grad_mode._grad_enabled:
                raise RuntimeError(
                    f"{op}: its argument (shape {value.shape}) requires grad, and in-place "
                    "writes are not recorded in the graph, so that gradient would be lost. "
                    "Build the result out of place (tf.where, tf.cat, masked_fill, x = x + y), "
                    "or pass value.detach() (or write under tf.no_grad()) if no gradient should "
                    "flow through it."
                )
            backend.check_same_device(op, self.data, value.data)
            return value.data
        if isinstance(value, (list, tuple, np.ndarray)) or backend.is_device_array(value):
            return backend.to_device(value, self.device)
        return value  # a number

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
        values = backend.to_device(draw.astype(self.dtype), self.device)
        return self._write(op, lambda a: a.__setitem__(..., values))

    def _write(self, op: str, write: Any) -> Tensor:
        """Check that `op` may write into this tensor, run `write(array)`, bump the version."""
        if self.requires_grad and grad_mode._grad_enabled:
            if self.grad_fn is None:
                raise RuntimeError(
                    f"{op}: a leaf Variable that requires grad is being used in an in-place "
                    f"operation (shape {self.shape}). Wrap the write in `with tf.no_grad():` "
                    "(as optimizers and initialisers do), or write into a copy (x.detach() "
                    "shares memory, x.clone() does not)."
                )
            raise RuntimeError(
                f"{op}: this tensor (shape {self.shape}) requires grad and was computed by "
                f"{self.grad_fn.name}; tinyformer does not record in-place operations in the "
                f"graph (PyTorch does). Use the out-of-place form instead: x = x + y for add_, "
                f"x = x.masked_fill(mask, v) for masked_fill_ or x[mask] = v, tf.where(...), "
                "tf.cat(...)."
            )
        try:
            write(self.data)
        except ValueError as e:  # a read-only array (expand's view), shapes that do not fit
            raise ValueError(f"{op}: {e} (tensor of shape {self.shape}, {self.dtype})") from e
        except TypeError as e:  # NumPy's casting errors: float into int with add_, ...
            raise TypeError(f"{op}: {e} (tensor of shape {self.shape}, {self.dtype})") from e
        write_name = "x[index] = value" if op == "__setitem__" else f"{op}()"
        versions.bump(self.data, f"{write_name} on a tensor of shape {self.shape}")
        return self
