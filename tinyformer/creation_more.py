"""More of PyTorch's creation functions: `empty_like`, `randint_like`, `normal` and `logspace`
(creation.py has the rest). Random numbers come from tinyformer's generator (`manual_seed`) or
from a `tf.Generator` passed as `generator=`, drawn on the host and moved to the device."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer import random as _random
from tinyformer.array_facts import as_array, default_dtype
from tinyformer.creation import zeros_like
from tinyformer.tensor import Tensor

__all__ = ["empty_like", "logspace", "normal", "randint_like"]


def empty_like(
    input: Any,  # noqa: A002
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """A tensor of `input`'s shape to be overwritten, on its device and with its dtype unless
    given: zeros, as `tf.empty` (PyTorch leaves whatever the memory held)."""
    return zeros_like(input, requires_grad, dtype=dtype, device=device)


def randint_like(
    input: Any,  # noqa: A002
    low: int = 0,
    high: int | None = None,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
    generator: _random.Generator | None = None,
) -> Tensor:
    """Integers drawn uniformly from [low, high), of `input`'s shape, on its device and with its
    dtype unless given (a float tensor gets whole numbers as floats), as `torch.randint_like`:
    `randint_like(x, high)` or `randint_like(x, low, high)`."""
    if high is None:
        low, high = 0, low
    if not low < high:
        raise ValueError(f"randint_like: need low < high, got low={low}, high={high}")
    data = input.data if isinstance(input, Tensor) else as_array(input)
    draws = _random.numpy_generator(generator).integers(low, high, size=data.shape)
    out = draws.astype(data.dtype if dtype is None else dtype)
    where = backend.device_of(data) if device is None else device
    return Tensor(out, requires_grad=requires_grad, device=where)


def normal(
    mean: Any = 0.0,
    std: Any = 1.0,
    size: Any = None,
    *,
    generator: _random.Generator | None = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """Samples of the normal distribution, as `torch.normal`: `normal(mean, std)` with a tensor
    mean, std or both (one sample per element, the two broadcast; the tensor's float dtype,
    mean's when both are tensors), or `normal(mean, std, size)` with numbers (the default float
    dtype unless `dtype` is given). std >= 0. No gradient: PyTorch's is zeros for mean and std
    alike (the samples are not reparameterised; write `mean + std * tf.randn_like(mean)` for
    that)."""
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if tensors:
        if size is not None:
            raise TypeError("normal: size= goes with a number mean and std, not tensors")
        for name, value in (("mean", mean), ("std", std)):
            if isinstance(value, Tensor) and value.dtype.kind != "f":
                raise TypeError(f"normal: {name} must be a floating tensor, got {value.dtype}")
        where = tensors[0].device
        kind = tensors[0].dtype if dtype is None else np.dtype(dtype)
        m, s = (backend.to_host(v.data) if isinstance(v, Tensor) else v for v in (mean, std))
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    else:
        if size is None:
            raise TypeError("normal: with a number mean and std, give size= (a tuple of ints)")
        m, s, where = mean, std, device
        kind = np.dtype(default_dtype() if dtype is None else dtype)
        shape = tuple(size)
    if np.any(np.asarray(s) < 0):
        raise ValueError(f"normal: std must be >= 0, got a minimum of {np.min(s)}")
    draws = _random.numpy_generator(generator).standard_normal(shape)
    out = (np.asarray(m, np.float64) + np.asarray(s, np.float64) * draws).astype(kind)
    return Tensor(out, requires_grad=requires_grad, device=where)


def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    *,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """`steps` values from base**start to base**end, evenly spaced in the exponent (the default
    float dtype unless `dtype` is given), computed as PyTorch computes them, so that the values
    are the same to the last bit: start, end and their difference in the dtype, the step in
    float64, the first half base**(start + i step) and the second half
    base**(end - (steps - 1 - i) step), each power in float64, then rounded."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ValueError(f"logspace: steps must be an integer >= 0, got {steps!r}")
    kind = np.dtype(default_dtype() if dtype is None else dtype)
    first, last = (kind.type(float(v)) for v in (start, end))
    step = float(last - first) / max(steps - 1, 1)  # the difference in the dtype, as PyTorch's
    first, last = float(first), float(last)
    i = np.arange(steps)
    exponent = np.where(i < max(steps // 2, 1), first + step * i, last - step * (steps - 1 - i))
    values = np.power(float(base), exponent).astype(kind)
    return Tensor(values, requires_grad=requires_grad, device=device)
