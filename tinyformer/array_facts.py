"""The array inside a `Tensor`: how data becomes one, and what can be read off it.

`as_array` turns what `Tensor(data)` and `tf.tensor(data)` are given into the array a tensor
holds: NumPy and device arrays are kept as they are (cast only when a dtype is asked for),
Python floats become the default float dtype (`default_dtype()`: float32 unless
`tf.set_default_dtype` changed it), as in PyTorch. `ArrayFacts`, a mixin `Tensor`
inherits, reads that array without computing anything new and without recording anything in
the graph: `x.shape`, `x.ndim`, `x.dtype`, `x.size`, `x.numpy()`, `x.item()`, `len(x)`,
`float(x)`, `int(x)`, `bool(x)`, `operator.index(x)` (a 0-d integer tensor as a list index or
slice bound), `f"{x:.4f}"`, `repr(x)`: a one-element tensor stands for its number, as in
PyTorch. The methods that compute (and so call an op) live in `tensor.py`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, device_checks
from tinyformer.torch_names import ElementCount

__all__ = ["ArrayFacts", "as_array", "default_dtype", "replace_default_dtype"]

# The float dtype made when none is asked for (float32, as in PyTorch). `tf.set_default_dtype`
# changes it, so every reader calls `default_dtype()` at call time rather than binding a value.
_DEFAULT = {"dtype": np.dtype(np.float32)}
# How tensors print (`tf.set_printoptions`): keyword arguments of np.array2string.
PRINT_OPTIONS: dict[str, Any] = {"precision": 4}


def default_dtype() -> np.dtype:
    """The float dtype that Python floats and the creation functions make by default."""
    return _DEFAULT["dtype"]


def replace_default_dtype(dtype: np.dtype) -> None:
    """Make `dtype` the default (`tf.set_default_dtype` checks it is a float dtype first)."""
    _DEFAULT["dtype"] = np.dtype(dtype)


def as_array(data: Any, dtype: Any = None) -> np.ndarray:
    """The array a tensor made from `data` holds (that of `data` itself when it is a tensor)."""
    if isinstance(data, ArrayFacts):  # a Tensor: the only class that inherits ArrayFacts
        data = data.data
    if isinstance(data, np.ndarray) or backend.is_device_array(data):
        array = data if dtype is None else data.astype(dtype, copy=False)
    else:
        array = np.asarray(data, dtype=dtype)
        if dtype is None and array.dtype == np.float64:  # Python floats: as in PyTorch
            array = array.astype(default_dtype())
    if array.dtype.kind not in "biuf":  # arrays too: complex ones would fail later, in some op
        raise TypeError(f"Tensor: unsupported dtype {array.dtype} (tensors hold real numbers)")
    return array


class ArrayFacts:
    """What `Tensor` reads off its array `.data` (it inherits these)."""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def size(self) -> ElementCount:
        """The element count, an int (NumPy's `x.size`); `x.size()` is the shape (PyTorch's)."""
        return ElementCount(self.data.shape)

    def numpy(self) -> np.ndarray:
        """The underlying array (shared, not copied); on a device, an error, as in PyTorch."""
        if not isinstance(self.data, np.ndarray):
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy: use .cpu() to copy "
                f"the tensor to host memory first"
            )
        return self.data

    def item(self) -> float | int | bool:
        if self.data.size != 1:
            raise ValueError(f"item: only a one-element tensor converts, this one has {self.shape}")
        if backend.is_device_array(self.data):  # a read: the moment to raise deferred errors
            device_checks.run()
        return self.data.item()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return np.array(self.numpy(), dtype=dtype, copy=copy)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise RuntimeError(
                f"Tensor.__bool__: the truth value of a tensor of shape {self.shape} is "
                "ambiguous (it has more or fewer than one value); use x.any() or x.all()"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self._number("__float__"))

    def __int__(self) -> int:
        return int(self._number("__int__"))

    def __index__(self) -> int:
        """`items[i]`, `x[:n]`, `range(n)` with a tensor i or n: its integer, as PyTorch's
        (which also takes a one-element integer tensor of any shape)."""
        if self.dtype.kind not in "biu" or self.data.size != 1:
            got = self.dtype if self.dtype.kind not in "biu" else f"shape {self.shape}"
            raise TypeError(
                f"Tensor.__index__: only integer 0-d tensors can be used as an index; got {got}"
            )
        return int(self.item())

    def __format__(self, spec: str) -> str:
        """`f"{loss:.4f}"` formats a 0-d tensor's number, as PyTorch's; other tensors format
        as their repr when the spec is empty."""
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(
                f"Tensor.__format__: the format spec {spec!r} applies to 0-d tensors (one "
                f"number); this one has shape {self.shape}: format x.item() or a 0-d tensor"
            )
        return str(self)

    def _number(self, op: str) -> float | int | bool:
        if self.data.size != 1:
            raise ValueError(
                f"Tensor.{op}: only one-element tensors can be converted to Python scalars; "
                f"this one has shape {self.shape}"
            )
        return self.item()

    def __repr__(self) -> str:
        host = backend.to_host(self.data)  # printing a device tensor copies it, as in PyTorch
        body = np.array2string(host, separator=", ", prefix="tensor(", **PRINT_OPTIONS)
        extra = "" if isinstance(self.data, np.ndarray) else f", device='{self.device}'"
        if self.dtype != default_dtype():
            extra += f", dtype={self.dtype}"
        if self.grad_fn is not None:
            extra += f", grad_fn={self.grad_fn!r}"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"
