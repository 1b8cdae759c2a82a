"""Creating tensors: from data (`tensor`, `from_numpy`), filled (`zeros`, `ones`, `full`,
`arange`, `*_like`) and random (`randn`, `rand`, from tinyformer's seeded generator)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import random as _random
from tinyformer.tensor import DEFAULT_DTYPE, Tensor, _as_array, _data

__all__ = [
    "arange",
    "from_numpy",
    "full",
    "ones",
    "ones_like",
    "rand",
    "randint",
    "randn",
    "tensor",
    "zeros",
    "zeros_like",
]


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of `data` (Python floats become float32)."""
    return Tensor(np.array(_as_array(data, dtype), copy=True), requires_grad=requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array`."""
    return Tensor(array)


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def zeros(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    return Tensor(np.zeros(_shape(shape), dtype), requires_grad=requires_grad)


def ones(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    return Tensor(np.ones(_shape(shape), dtype), requires_grad=requires_grad)


def full(
    shape: Any, value: float, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False
) -> Tensor:
    return Tensor(np.full(shape, value, dtype), requires_grad=requires_grad)


def zeros_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    return Tensor(np.zeros_like(_data(x)), requires_grad=requires_grad)


def ones_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    return Tensor(np.ones_like(_data(x)), requires_grad=requires_grad)


def arange(*args: float, dtype: Any = None) -> Tensor:
    """Like `numpy.arange`; integer arguments give int64, others float32."""
    array = np.arange(*args)
    if dtype is None and array.dtype.kind == "f":
        dtype = DEFAULT_DTYPE
    return Tensor(array, dtype=dtype)


def randn(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """Standard normal samples from tinyformer's generator (see `tinyformer.manual_seed`)."""
    array = _random.generator().standard_normal(_shape(shape)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def rand(*shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) from tinyformer's generator."""
    array = _random.generator().random(_shape(shape)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad)


def randint(*args: int, size: Any = None, dtype: Any = np.int64) -> Tensor:
    """Integers drawn uniformly from [low, high) by tinyformer's generator, as `torch.randint`:
    `randint(high, size)` or `randint(low, high, size)`; `size` is a tuple (or a keyword)."""
    if size is None and args and isinstance(args[-1], (tuple, list)):
        args, size = args[:-1], args[-1]
    if size is None or len(args) not in (1, 2):
        raise TypeError(
            "randint: call as randint(high, size) or randint(low, high, size), with size a "
            f"tuple such as (4,); got arguments {args} and size={size!r}"
        )
    low, high = (0, args[0]) if len(args) == 1 else args
    if not low < high:
        raise ValueError(f"randint: need low < high, got low={low}, high={high}")
    array = _random.generator().integers(low, high, size=tuple(size), dtype=dtype)
    return Tensor(array)
