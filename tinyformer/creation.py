"""Creating tensors: from data (`tensor`, `from_numpy`), filled (`zeros`, `ones`, `full`,
`arange`, `*_like`) and random (`randn`, `rand`, `randint`, `multinomial`, from tinyformer's
seeded generator). `device=` puts the result on a device ("cpu", "cuda"); random numbers are
drawn on the host and moved, so a seed gives the same numbers on every device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer import random as _random
from tinyformer.array_facts import DEFAULT_DTYPE, as_array
from tinyformer.tensor import Tensor, _data

__all__ = [
    "arange",
    "from_numpy",
    "full",
    "multinomial",
    "ones",
    "ones_like",
    "rand",
    "randint",
    "randn",
    "tensor",
    "zeros",
    "zeros_like",
]


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A new tensor holding a copy of `data` (Python floats become float32)."""
    array = as_array(data, dtype).copy()
    return Tensor(array, requires_grad=requires_grad, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array`."""
    return Tensor(array)


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def zeros(
    *shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False, device: Any = None
) -> Tensor:
    array = backend.array_module(device).zeros(_shape(shape), dtype)
    return Tensor(array, requires_grad=requires_grad)


def ones(
    *shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False, device: Any = None
) -> Tensor:
    array = backend.array_module(device).ones(_shape(shape), dtype)
    return Tensor(array, requires_grad=requires_grad)


def full(
    shape: Any,
    value: float,
    dtype: Any = DEFAULT_DTYPE,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    array = backend.array_module(device).full(shape, value, dtype)
    return Tensor(array, requires_grad=requires_grad)


def zeros_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    """On `x`'s device, with its shape and dtype."""
    data = _data(x)
    return Tensor(backend.get_array_module(data).zeros_like(data), requires_grad=requires_grad)


def ones_like(x: Tensor, requires_grad: bool = False) -> Tensor:
    """On `x`'s device, with its shape and dtype."""
    data = _data(x)
    return Tensor(backend.get_array_module(data).ones_like(data), requires_grad=requires_grad)


def arange(*args: float, dtype: Any = None, device: Any = None) -> Tensor:
    """Like `numpy.arange`; integer arguments give int64, others float32."""
    array = np.arange(*args)
    if dtype is None and array.dtype.kind == "f":
        dtype = DEFAULT_DTYPE
    return Tensor(array, dtype=dtype, device=device)


def randn(
    *shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Standard normal samples from tinyformer's generator (see `tinyformer.manual_seed`)."""
    array = _random.generator().standard_normal(_shape(shape)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad, device=device)


def rand(
    *shape: Any, dtype: Any = DEFAULT_DTYPE, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """Uniform samples in [0, 1) from tinyformer's generator."""
    array = _random.generator().random(_shape(shape)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad, device=device)


def randint(*args: int, size: Any = None, dtype: Any = np.int64, device: Any = None) -> Tensor:
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
    return Tensor(array, device=device)


def multinomial(input: Any, num_samples: int, replacement: bool = False) -> Tensor:  # noqa: A002
    """Category indices drawn from each row of `input`'s weights, as `torch.multinomial`:
    `input` is 1-D (one distribution) or 2-D (one per row), its weights >= 0 and need not sum
    to 1; the result is int64 of shape (num_samples,) or (rows, num_samples). Without
    replacement, a row's samples are distinct; they are drawn by the Gumbel top-k trick
    (the num_samples largest log w + Gumbel noise), which draws them in the same order and
    with the same probabilities as removing each pick and drawing again."""
    data = _data(input)
    device = backend.device_of(data) if backend.is_device_array(data) else None
    # drawn on the host, from the host generator (so a seed draws the same on every device)
    weights = np.asarray(data if device is None else backend.to_host(data), dtype=np.float64)
    if weights.ndim not in (1, 2) or weights.shape[-1] == 0:
        raise ValueError(f"multinomial: input must be 1-D or 2-D weights, got {weights.shape}")
    rows = weights.reshape(-1, weights.shape[-1])  # (R, V): one distribution per row
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise ValueError("multinomial: the weights must be finite and >= 0")
    positive = (rows > 0).sum(axis=-1)  # categories that can be drawn, per row
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"multinomial: num_samples must be an integer, got {num_samples!r}")
    if num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be at least 1, got {num_samples}")
    if positive.min() == 0:
        raise ValueError(f"multinomial: row {int(positive.argmin())} of the weights sums to 0")
    if not replacement and num_samples > positive.min():
        raise ValueError(
            f"multinomial: cannot draw {num_samples} distinct samples from a row with only "
            f"{positive.min()} positive weights; pass replacement=True"
        )
    rng = _random.generator()
    if replacement or num_samples == 1:
        picks = _random.categorical(rows, num_samples, rng)
    else:
        with np.errstate(divide="ignore"):  # log 0 = -inf: a weight of 0 is never drawn
            keys = np.log(rows) + rng.gumbel(size=rows.shape)
        picks = np.argsort(-keys, axis=-1)[:, :num_samples]
    picks = picks.reshape(*weights.shape[:-1], num_samples).astype(np.int64)
    return Tensor(picks, device=device)
