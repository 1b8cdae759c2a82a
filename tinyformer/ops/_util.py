"""Helpers shared by the ops: the broadcasting gradient rule, axis handling, argument coercion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.array_facts import default_dtype
from tinyformer.autograd import OpError
from tinyformer.tensor import Tensor


def unbroadcast(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum the gradient `g` down to `shape`: the one gradient rule of broadcasting.

    Broadcasting copies an input along the leading axes it lacks and along its size-1 axes, so each
    of its elements fed several outputs; its gradient is the sum of theirs.
    """
    ### BEGIN SOLUTION A1.3 library: withheld from releases until A1 is due
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    return g.sum(axis=axes, keepdims=True).reshape(shape)
    ### END SOLUTION


def normalize_axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    """`axis` (None, an int or a tuple, possibly negative) as a sorted tuple of positive axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    if not isinstance(axes, (tuple, list)) or not all(
        isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in axes
    ):
        raise OpError(f"{op}: axis must be an int or a tuple of ints, got {axis!r}")
    out = []
    for a in axes:
        if not -ndim <= a < max(ndim, 1):
            raise OpError(f"{op}: axis {a} is out of range for a tensor of {ndim} dimensions")
        out.append(int(a) % max(ndim, 1))
    if len(set(out)) != len(out):
        raise OpError(f"{op}: repeated axis in {axis}")
    return tuple(sorted(out))


def normalized_shape_tuple(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """The norms' `normalized_shape` (an int for the last axis, or the trailing axes' sizes) as
    a tuple: layer_norm, rms_norm and their layers."""
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(normalized_shape)


def expand_reduced(g: np.ndarray, shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool):
    """Broadcast the gradient of a reduction back to the input's shape."""
    xp = backend.get_array_module(g)
    if not keepdims:
        g = xp.expand_dims(g, axes)
    return xp.broadcast_to(g, shape)


def as_operand(x: Any, like: Any = None) -> Any:
    """A Tensor stays; anything else becomes an array on the other operand's device.

    A Python (or NumPy) scalar is weak, as in PyTorch: it takes the other operand's dtype when
    it is of the same kind or a lower one (`x * 2` stays float32, `i + 1` stays int32), and
    the default dtype of its own kind otherwise (`i * 1.5` makes the scalar the default float
    dtype, float32, and `binary_operands` then makes `i` float32 too)."""
    if isinstance(x, Tensor):
        return x
    other = data_of(like)
    if type(other) is np.ndarray and type(x) in (float, int) and other.dtype.kind == "f":
        return np.asarray(x, dtype=other.dtype)  # `y * 0.5` on the host, as below, at once
    xp = backend.get_array_module(other)
    dtype = getattr(other, "dtype", None)
    if isinstance(x, (int, float, bool, np.number, np.bool_)):
        scalar = _scalar_dtype(x, dtype)
        return xp.asarray(x, dtype=scalar)
    if isinstance(x, np.ndarray) or backend.is_device_array(x):
        return x if xp is np else backend.to_device(x, backend.device_of(other))
    array = np.asarray(x)  # Python data: floats become the default dtype, as in a Tensor
    array = array.astype(default_dtype()) if array.dtype == np.float64 else array
    return array if xp is np else backend.to_device(array, backend.device_of(other))


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}  # bool < integers < floats, as PyTorch ranks them


def _scalar_dtype(x: Any, other: np.dtype | None) -> np.dtype:
    """The dtype a scalar takes beside an array of dtype `other` (None: no array)."""
    own = np.asarray(x).dtype
    own = default_dtype() if own.kind == "f" else own  # PyTorch's default float dtype
    if other is None or _KIND_RANK.get(other.kind, 2) < _KIND_RANK.get(own.kind, 2):
        return own
    if other.kind in "iu" and own.kind in "iu":
        info = np.iinfo(other)
        if not info.min <= x <= info.max:  # would wrap: keep int64 (NumPy then promotes)
            return own
    return other


def binary_operands(x1: Any, x2: Any) -> tuple[Any, Any]:
    """The two operands of a binary op (add, mul, div, ...), promoted as PyTorch does across
    kinds: an integer or boolean operand beside a floating one takes the floating one's dtype
    (float32 * int64 is float32, where NumPy would give float64). Within a kind, NumPy's rules
    hold (float32 * float64 is float64, as in PyTorch). An integer operand is data, not a
    differentiable input, so it is converted as an array."""
    a, b = as_operand(x1, x2), as_operand(x2, x1)
    kind_a, kind_b = data_of(a).dtype.kind, data_of(b).dtype.kind
    if kind_a == "f" and kind_b != "f":
        b = data_of(b).astype(data_of(a).dtype)
    elif kind_b == "f" and kind_a != "f":
        a = data_of(a).astype(data_of(b).dtype)
    return a, b


def data_of(x: Any) -> Any:
    """The array behind a Tensor, or the value itself."""
    return x.data if isinstance(x, Tensor) else x


def array_of(x: Any) -> Any:
    """The array behind a Tensor or array-like, on whatever device it is: a Tensor's data, an
    ndarray or device array as it is, a list as an ndarray. (Not `getattr(x, "data", x)`: a
    CuPy array's `.data` is its memory pointer.)"""
    x = data_of(x)
    return x if backend.is_device_array(x) else np.asarray(x)


def same_shape_target(op: str, input: Tensor, target: Any) -> Tensor:  # noqa: A002
    """A loss's target of input's shape: a tensor that needs a gradient stays one (its dtype
    must then be input's); anything else (labels as integers or booleans, probabilities) is
    data, converted to input's dtype."""
    if isinstance(target, Tensor) and target.requires_grad:
        if target.dtype != input.dtype:
            raise OpError(
                f"{op}: input is {input.dtype} and target {target.dtype}; both need "
                "gradients, so convert one (target.to(input.dtype))"
            )
        t = target
    else:
        t = Tensor(data_of(target), dtype=input.dtype, device=input.device)
    if t.shape != input.shape:
        raise OpError(
            f"{op}: input {input.shape} and target {t.shape} must have the same shape (reshape "
            "one of them; broadcasting them would compare every pair)"
        )
    return t
