"""PyTorch's functions that are Tensor methods here (`torch.nonzero(x)` is `x.nonzero()`), and
`finfo`/`iinfo`, the limits of a dtype. Each takes a Tensor or array-like data."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.tensor import Tensor

__all__ = [
    "argwhere", "finfo", "flip", "iinfo", "index_select", "narrow", "nonzero", "numel", "sort",
    "unbind",
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
