"""PyTorch's functions that are Tensor methods here (`torch.nonzero(x)` is `x.nonzero()`), and
`finfo`/`iinfo`, the limits of a dtype. Each takes a Tensor or array-like data.

`tf.max` and `tf.min` are PyTorch's three functions in one, as `torch.max` is: `max(x)` the
largest element, `max(x, 1)` (or `dim=1`) the (values, indices) pair along an axis, and
`max(x, y)` with a tensor `y` the elementwise `maximum`. NumPy's `axis=` gives the values
only, as `np.max` (the ops' `tinyformer.ops.max` is NumPy's form throughout)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import ops
from tinyformer.tensor import Tensor

__all__ = [
    "argwhere", "finfo", "flip", "iinfo", "index_select", "max", "min", "narrow", "nonzero",
    "numel", "sort", "unbind",
]  # fmt: skip


def _as_tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


def nonzero(input: Any, *, as_tuple: bool = False) -> Any:  # noqa: A002
    """`input.nonzero()`: the coordinates of the nonzero elements."""
    return _as_tensor(input).nonzero(as_tuple=as_tuple)


def argwhere(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).argwhere()


def unbind(input: Any, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    return _as_tensor(input).unbind(dim)


def narrow(input: Any, dim: int, start: Any, length: int) -> Tensor:  # noqa: A002
    return _as_tensor(input).narrow(dim, start, length)


def index_select(input: Any, dim: int, index: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).index_select(dim, index)


def sort(input: Any, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:  # noqa: A002
    return _as_tensor(input).sort(dim, descending, stable)


def flip(input: Any, dims: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).flip(dims)


def numel(input: Any) -> int:  # noqa: A002
    return _as_tensor(input).numel()


def finfo(type: Any = np.float32) -> np.finfo:  # noqa: A002
    """The limits of a floating dtype (`torch.finfo(x.dtype).max`, `.min`, `.eps`, `.tiny`),
    NumPy's `finfo`; float32 when no dtype is given, as PyTorch's default."""
    return np.finfo(type)


def iinfo(type: Any) -> np.iinfo:  # noqa: A002
    """The limits of an integer dtype (`torch.iinfo(torch.int64).max`), NumPy's `iinfo`."""
    return np.iinfo(type)


def _extreme(op: str, input: Any, dim: Any, kwargs: dict) -> Any:  # noqa: A002
    x = _as_tensor(input)
    if dim is None:
        return getattr(x, op)(**kwargs)
    if isinstance(dim, Tensor | np.ndarray):  # torch.max(a, b): the elementwise one
        if kwargs:
            raise TypeError(f"{op}(input, other) takes no {', '.join(kwargs)}")
        return (ops.maximum if op == "max" else ops.minimum)(x, dim)
    return getattr(x, op)(dim=dim, **kwargs)


def max(input: Any, dim: Any = None, **kwargs: Any) -> Any:  # noqa: A001, A002
    """As `torch.max`: the largest element; with `dim`, (values, indices); with a tensor
    `other` in dim's place, the elementwise maximum; with `axis=`, NumPy's values."""
    return _extreme("max", input, dim, kwargs)


def min(input: Any, dim: Any = None, **kwargs: Any) -> Any:  # noqa: A001, A002
    """As `torch.min`: the smallest element; with `dim`, (values, indices); with a tensor
    `other` in dim's place, the elementwise minimum; with `axis=`, NumPy's values."""
    return _extreme("min", input, dim, kwargs)
