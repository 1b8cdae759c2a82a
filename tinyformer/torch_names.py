"""PyTorch's spellings, accepted beside NumPy's, so that code copied from PyTorch runs.

- `dim=` for `axis=` and `keepdim=` for `keepdims=`: `F.softmax(x, dim=-1)`,
  `x.sum(dim=1, keepdim=True)`, `tf.cat(xs, dim=-1)`. PyTorch takes NumPy's names the same way
  (`torch.sum(x, axis=0, keepdims=True)` works there), so either spelling runs in both.
- `x.size()`: NumPy's `x.size` is the element count, PyTorch's `x.size()` the shape.
  `ElementCount` is both: an int that returns the shape when called.
- Tensor methods PyTorch code calls and NumPy has under other names or not at all
  (`TorchSpellings`: `x.dim()`, `x.numel()`, `x.float()`, `x.long()`, `x.clamp()`,
  `x.to(dtype)`, ...).

`max` and `min` refuse `dim=` and `keepdim=` with an explanation instead of accepting them:
PyTorch's `x.max(dim=1)` returns (values, indices), tinyformer's the values only (as
`torch.amax`), so `x.max(dim=1, keepdim=True)[0]` would silently pick the first row.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = ["ElementCount", "TorchSpellings", "max_names", "torch_names"]

Fn = TypeVar("Fn", bound=Callable[..., Any])

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}  # PyTorch's name -> tinyformer's


def torch_names(fn: Fn) -> Fn:
    """`fn`, also taking `dim=` for its `axis` and `keepdim=` for its `keepdims` argument."""
    names = inspect.signature(fn).parameters
    aliases = {torch: ours for torch, ours in _ALIASES.items() if ours in names}
    where = fn.__qualname__

    @functools.wraps(fn)
    def with_torch_names(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            for torch, ours in aliases.items():
                if torch in kwargs:
                    if ours in kwargs:
                        raise TypeError(
                            f"{where}: got both {ours}= and {torch}=, which name the same "
                            "argument (PyTorch's name and NumPy's); pass one"
                        )
                    kwargs[ours] = kwargs.pop(torch)
        return fn(*args, **kwargs)

    return with_torch_names  # type: ignore[return-value]


def max_names(fn: Fn) -> Fn:
    """`fn` (max or min), refusing PyTorch's `dim=` and `keepdim=` with the reason."""
    op = fn.__name__

    @functools.wraps(fn)
    def refusing_torch_names(*args: Any, **kwargs: Any) -> Any:
        if "dim" in kwargs or "keepdim" in kwargs:
            raise TypeError(
                f"{op}: takes axis= and keepdims=, not dim= or keepdim=. PyTorch's "
                f"x.{op}(dim=...) returns (values, indices); tinyformer's x.{op}(axis=...) "
                f"returns the values only, as torch.a{op} does. Use x.{op}(axis=...) for the "
                f"values and x.arg{op}(axis=...) for the indices"
            )
        return fn(*args, **kwargs)

    return refusing_torch_names  # type: ignore[return-value]


class ElementCount(int):
    """`x.size`: the element count, an int (NumPy's name). Called, it is PyTorch's `x.size()`:
    the shape, or `x.size(dim)`, the length of one axis."""

    def __new__(cls, shape: tuple[int, ...]) -> ElementCount:
        count = super().__new__(cls, math.prod(shape))
        count.shape = tuple(shape)
        return count

    def __call__(self, dim: int | None = None) -> Any:
        if dim is None:
            return self.shape
        if not -len(self.shape) <= dim < len(self.shape):
            raise IndexError(f"size: dim {dim} is out of range for a tensor of shape {self.shape}")
        return self.shape[dim]


class TorchSpellings:
    """Tensor methods under PyTorch's names that compute nothing new: each reads the array or
    calls another method. (`Tensor` inherits them; its own methods are the ops.)"""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    def dim(self) -> int:
        """The number of axes (`x.ndim`)."""
        return self.data.ndim

    def numel(self) -> int:
        """The element count (also `x.size`, NumPy's name)."""
        return self.data.size

    def tolist(self) -> Any:
        """The values as nested Python lists (a number for a 0-d tensor)."""
        return self.data.tolist()

    def contiguous(self) -> Tensor:
        """`self`: ops that need contiguous memory make it themselves (`reshape` copies when a
        view cannot be had), so there is nothing to do here; kept for PyTorch code."""
        return self

    def to(self, dtype: Any) -> Tensor:
        """`x.to(dtype)`: the values as `dtype` (differentiable). There are no devices (tensors
        hold NumPy arrays), so `x.to("cpu")` and `x.to(device)` are errors, as `Module.to`'s."""
        if isinstance(dtype, str) and dtype.split(":")[0] in ("cpu", "cuda", "mps"):
            raise TypeError(
                f"Tensor.to: takes a dtype such as 'float64', got {dtype!r}; there are no devices "
                "to move to (tensors hold NumPy arrays), so a PyTorch .to(device) can go"
            )
        return self.astype(dtype)

    def long(self) -> Tensor:
        """`x` as int64 (indices; no gradient flows through integers)."""
        return self.astype(np.int64)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """`x.clip(min, max)`, under PyTorch's name."""
        return self.clip(min, max)

    def float(self) -> Tensor:
        """`x` as float32 (`x.to("float32")`)."""
        return self.astype(np.float32)

    def double(self) -> Tensor:
        """`x` as float64."""
        return self.astype(np.float64)
