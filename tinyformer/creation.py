"""Creating tensors: from data (`tensor`, `from_numpy`, and PyTorch's legacy `FloatTensor`,
`LongTensor`, ...), filled (`zeros`, `ones`, `full`, `empty`, `arange`, `linspace`, `*_like`)
and random (`randn`, `rand`, `randint`, `randperm`, `multinomial`, from tinyformer's seeded
generator, or from a `tf.Generator` passed as `generator=`). `device=` puts the result on a
device ("cpu", "cuda"); random numbers are drawn on the host and moved, so a seed gives the
same numbers on every device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer import random as _random
from tinyformer.array_facts import as_array, default_dtype
from tinyformer.tensor import Tensor, _data

__all__ = [
    "BoolTensor", "ByteTensor", "DoubleTensor", "FloatTensor", "IntTensor", "LongTensor",
    "arange", "as_tensor", "empty", "eye", "from_numpy", "full", "full_like", "linspace",
    "multinomial", "ones", "ones_like", "rand", "rand_like", "randint", "randn", "randn_like",
    "randperm", "tensor", "zeros", "zeros_like",
]  # fmt: skip


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A new tensor holding a copy of `data` (Python floats become the default float dtype)."""
    array = as_array(data, dtype).copy()
    return Tensor(array, requires_grad=requires_grad, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array`."""
    return Tensor(array)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """`data` as a tensor, sharing its memory where it can, as `torch.as_tensor`: a tensor comes
    back itself (cast or moved only if asked), an array of the kept dtype is not copied."""
    if isinstance(data, Tensor):
        out = data if dtype is None else data.to(dtype)
        return out if device is None else out.to(device)
    return Tensor(as_array(data, dtype), device=device)


def eye(
    n: int, m: int | None = None, *, dtype: Any = None, requires_grad: bool = False,
    device: Any = None,
) -> Tensor:  # fmt: skip
    """The n x m identity matrix (m = n by default), as `torch.eye`."""
    for name, side in (("n", n), ("m", n if m is None else m)):
        if isinstance(side, bool) or not isinstance(side, (int, np.integer)) or side < 0:
            raise ValueError(f"eye: {name} must be an int >= 0, got {side!r}")
    array = backend.array_module(device).eye(n, m, dtype=_float(dtype))
    return Tensor(array, requires_grad=requires_grad)


def _float(dtype: Any) -> Any:
    """`dtype`, or the default float dtype (read now: `tf.set_default_dtype` may change it)."""
    return default_dtype() if dtype is None else dtype


def _shape(shape: Sequence[Any]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def zeros(
    *shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    array = backend.array_module(device).zeros(_shape(shape), _float(dtype))
    return Tensor(array, requires_grad=requires_grad)


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    array = backend.array_module(device).ones(_shape(shape), _float(dtype))
    return Tensor(array, requires_grad=requires_grad)


def full(
    shape: Any,
    value: float,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    array = backend.array_module(device).full(shape, value, _float(dtype))
    return Tensor(array, requires_grad=requires_grad)


def zeros_like(
    x: Tensor, requires_grad: bool = False, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """Zeros with `x`'s shape, on its device and with its dtype unless given."""
    shape, dtype, device = _like(x, dtype, device)
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad, device=device)


def ones_like(
    x: Tensor, requires_grad: bool = False, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """Ones with `x`'s shape, on its device and with its dtype unless given."""
    shape, dtype, device = _like(x, dtype, device)
    return ones(*shape, dtype=dtype, requires_grad=requires_grad, device=device)


def full_like(
    x: Tensor,
    fill_value: float,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """`fill_value` everywhere, with `x`'s shape, on its device and with its dtype unless
    given."""
    shape, dtype, device = _like(x, dtype, device)
    return full(shape, fill_value, dtype, requires_grad, device)


def _like(x: Any, dtype: Any, device: Any) -> tuple[tuple[int, ...], Any, Any]:
    """(shape, dtype, device) for a `*_like` function: x's unless given."""
    data = x.data if isinstance(x, Tensor) else as_array(x, None)
    return (
        data.shape,
        data.dtype if dtype is None else dtype,
        backend.device_of(data) if device is None else device,
    )


def empty(
    *shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """A tensor of `shape` whose values the caller will overwrite, as `torch.empty`. Its
    values are zeros here (PyTorch leaves whatever the memory held), so that a forgotten write
    shows as zeros and never as a different garbage value each run."""
    return zeros(*shape, dtype=dtype, requires_grad=requires_grad, device=device)


def linspace(
    start: float,
    end: float,
    steps: int,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """`steps` evenly spaced values from `start` to `end`, both included (the default float
    dtype unless a dtype is given), as `torch.linspace`, and computed as PyTorch computes
    them, so that the values are the same to the last bit: step = (end - start) / (steps - 1)
    in the result's dtype, the first half start + i step and the second half
    end - (steps - 1 - i) step (which makes the last value exactly `end`), each a fused
    multiply-add (one rounding)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"linspace: steps must be an integer >= 0, got {steps!r}")
    dtype = np.dtype(_float(dtype))
    start, end = (float(_data(v)) for v in (start, end))
    i = np.arange(steps)
    if dtype.kind == "f":  # the step in the result's dtype; the multiply-add in more precision
        wide = np.longdouble if dtype.itemsize == 8 else np.float64
        first, last = dtype.type(start), dtype.type(end)
        step = (last - first) / dtype.type(max(steps - 1, 1))
        first, last, step = wide(first), wide(last), wide(step)
    else:  # integers: the values of a float64 linspace, truncated (as PyTorch's)
        first, last = start, end
        step = (end - start) / max(steps - 1, 1)
    values = np.where(i < max(steps // 2, 1), first + step * i, last - step * (steps - 1 - i))
    return Tensor(values.astype(dtype), requires_grad=requires_grad, device=device)


def arange(
    *args: float,
    step: float | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Like `numpy.arange` (and `torch.arange(0, n, step=2)`); integer arguments give int64,
    others the default float dtype."""
    if step is not None:
        if len(args) == 1:  # torch.arange(5, step=2) counts from 0, as arange(0, 5, 2)
            args = (0, args[0])
        if len(args) != 2:
            raise TypeError(f"arange: step= goes with start and end, got {len(args)} positions")
        args = (*args, step)
    array = np.arange(*args)
    if dtype is None and array.dtype.kind == "f":
        dtype = default_dtype()
    return Tensor(array, dtype=dtype, device=device, requires_grad=requires_grad)


def randn(
    *shape: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
    """Standard normal samples from tinyformer's generator (see `tinyformer.manual_seed`)."""
    rng = _random.numpy_generator(generator)
    array = rng.standard_normal(_shape(shape)).astype(_float(dtype))
    return Tensor(array, requires_grad=requires_grad, device=device)


def rand(
    *shape: Any,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
    """Uniform samples in [0, 1) from tinyformer's generator."""
    array = _random.numpy_generator(generator).random(_shape(shape)).astype(_float(dtype))
    return Tensor(array, requires_grad=requires_grad, device=device)


def randn_like(
    x: Tensor,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
    """`randn` with `x`'s shape, on its device and with its dtype unless given."""
    return _random_like(randn, "randn_like", x, dtype, requires_grad, device, generator)


def rand_like(
    x: Tensor,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
    """`rand` with `x`'s shape, on its device and with its dtype unless given."""
    return _random_like(rand, "rand_like", x, dtype, requires_grad, device, generator)


def _random_like(draw, op, x, dtype, requires_grad, device, generator) -> Tensor:
    shape, dtype, device = _like(x, dtype, device)
    if np.dtype(dtype).kind != "f":  # the samples would round silently; PyTorch refuses too
        raise TypeError(f"{op}: samples need a floating dtype, got {np.dtype(dtype)}")
    return draw(
        *shape, dtype=dtype, requires_grad=requires_grad, device=device, generator=generator
    )


def randint(
    *args: int,
    size: Any = None,
    dtype: Any = np.int64,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
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
    rng = _random.numpy_generator(generator)
    array = rng.integers(low, high, size=tuple(size), dtype=dtype)
    return Tensor(array, device=device)


def randperm(
    n: int,
    *,
    generator: _random.Generator | None = None,
    dtype: Any = np.int64,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """A random permutation of 0..n-1 (int64), as `torch.randperm`: drawn by tinyformer's
    generator, or by `generator` (a `tf.Generator`). The same seed gives another permutation
    than PyTorch's, whose generator is another algorithm."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"randperm: n must be an integer >= 0, got {n!r}")
    array = _random.numpy_generator(generator).permutation(int(n)).astype(dtype)
    return Tensor(array, requires_grad=requires_grad, device=device)


def multinomial(
    input: Any,  # noqa: A002
    num_samples: int,
    replacement: bool = False,
    *,
    generator: _random.Generator | None = None,
) -> Tensor:
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
    rng = _random.numpy_generator(generator)
    if replacement or num_samples == 1:
        picks = _random.categorical(rows, num_samples, rng)
    else:
        with np.errstate(divide="ignore"):  # log 0 = -inf: a weight of 0 is never drawn
            keys = np.log(rows) + rng.gumbel(size=rows.shape)
        picks = np.argsort(-keys, axis=-1)[:, :num_samples]
    picks = picks.reshape(*weights.shape[:-1], num_samples).astype(np.int64)
    return Tensor(picks, device=device)


class _LegacyType(type):
    """`isinstance(x, tf.FloatTensor)`: whether x is a Tensor of that dtype, as in PyTorch."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype


class _LegacyTensor(metaclass=_LegacyType):
    """PyTorch's legacy constructors: `FloatTensor(2, 3)` (a shape: zeros here, uninitialised
    memory in PyTorch; see `empty`), `FloatTensor([1, 2])` (data, converted to the dtype, as
    PyTorch converts it: 1.7 becomes 1 in a LongTensor), `FloatTensor()` (no elements)."""

    dtype: np.dtype

    def __new__(cls, *args: Any, device: Any = None) -> Tensor:  # type: ignore[misc]
        name = cls.__name__
        if not args:
            return Tensor(np.zeros((0,), cls.dtype), device=device)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            return zeros(*args, dtype=cls.dtype, device=device)
        if len(args) > 1:
            raise TypeError(
                f"{name}: takes sizes (ints: {name}(2, 3)) or one sequence of data "
                f"({name}([1, 2])), got {args!r}"
            )
        (data,) = args
        if isinstance(data, Tensor):  # PyTorch shares the tensor, of the same dtype only
            if data.dtype != cls.dtype:
                raise TypeError(
                    f"{name}: expected a tensor of dtype {cls.dtype}, got {data.dtype}; "
                    f"convert it with x.to({str(cls.dtype)!r})"
                )
            return data
        return Tensor(np.asarray(data).astype(cls.dtype), device=device)


class FloatTensor(_LegacyTensor):
    dtype = np.dtype(np.float32)


class DoubleTensor(_LegacyTensor):
    dtype = np.dtype(np.float64)


class LongTensor(_LegacyTensor):
    dtype = np.dtype(np.int64)


class IntTensor(_LegacyTensor):
    dtype = np.dtype(np.int32)


class ByteTensor(_LegacyTensor):
    dtype = np.dtype(np.uint8)


class BoolTensor(_LegacyTensor):
    dtype = np.dtype(np.bool_)
