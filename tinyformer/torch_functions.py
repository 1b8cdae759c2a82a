"""PyTorch's functions that are Tensor methods here (`torch.nonzero(x)` is `x.nonzero()`), and
`finfo`/`iinfo`, the limits of a dtype. Each takes a Tensor or array-like data.

`tf.max` and `tf.min` are PyTorch's three functions in one, as `torch.max` is: `max(x)` the
largest element, `max(x, 1)` (or `dim=1`) the (values, indices) pair along an axis, and
`max(x, y)` with a tensor `y` the elementwise `maximum`. NumPy's `axis=` gives the values
only, as `np.max` (the ops' `tinyformer.ops.max` is NumPy's form throughout)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, ops
from tinyformer.array_facts import default_dtype
from tinyformer.autograd import OpError
from tinyformer.tensor import Tensor

__all__ = [
    "all", "allclose", "any", "argwhere", "bernoulli", "bmm", "compile", "eq", "equal", "finfo",
    "flip", "ge", "gt", "iinfo", "index_fill", "index_select", "isclose", "le", "lt", "max",
    "min", "narrow", "ne", "nonzero", "numel", "repeat_interleave", "set_printoptions", "sort",
    "t", "unbind",
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


def finfo(type: Any = None) -> np.finfo:  # noqa: A002
    """The limits of a floating dtype (`torch.finfo(x.dtype).max`, `.min`, `.eps`, `.tiny`),
    NumPy's `finfo`; the default float dtype (float32) when none is given, as PyTorch's."""
    return np.finfo(default_dtype() if type is None else type)


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


def bmm(input: Any, mat2: Any) -> Tensor:  # noqa: A002
    """Batched matrix product of (B, n, m) and (B, m, p) -> (B, n, p), as `torch.bmm`: `matmul`
    that refuses other shapes (matmul would broadcast them)."""
    x, y = _as_tensor(input), _as_tensor(mat2)
    if x.ndim != 3 or y.ndim != 3 or x.shape[0] != y.shape[0] or x.shape[2] != y.shape[1]:
        raise OpError(f"bmm: expected (B, n, m) and (B, m, p), got shapes {x.shape} and {y.shape}")
    return ops.matmul(x, y)


def isclose(
    input: Any,  # noqa: A002
    other: Any,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
) -> Tensor:
    """True where |input - other| <= atol + rtol |other| (elementwise, no gradient)."""
    x, y = _as_tensor(input), _as_tensor(other)
    backend.check_same_device("isclose", x.data, y.data)
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise OpError(f"isclose: shapes {x.shape} and {y.shape} do not broadcast") from None
    xp = backend.get_array_module(x.data)
    return Tensor(xp.isclose(x.data, y.data, rtol=rtol, atol=atol, equal_nan=equal_nan))


def allclose(
    input: Any,  # noqa: A002
    other: Any,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    equal_nan: bool = False,
) -> bool:
    """Whether every element is close (`isclose`), a Python bool, as `torch.allclose`."""
    return bool(isclose(input, other, rtol, atol, equal_nan).data.all())


# Comparisons, reductions to a bool and the rest of PyTorch's functions that are methods here.
def eq(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).eq(other)


def ne(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).ne(other)


def lt(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).lt(other)


def le(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).le(other)


def gt(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).gt(other)


def ge(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).ge(other)


def all(input: Any, *args: Any, **kwargs: Any) -> Tensor:  # noqa: A001, A002
    return _as_tensor(input).all(*args, **kwargs)


def any(input: Any, *args: Any, **kwargs: Any) -> Tensor:  # noqa: A001, A002
    return _as_tensor(input).any(*args, **kwargs)


def t(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).t()


def index_fill(input: Any, dim: int, index: Any, value: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).index_fill(dim, index, value)


def equal(input: Any, other: Any) -> bool:  # noqa: A002
    """True if the two have the same shape and the same elements, as `torch.equal` (a Python
    bool, not a tensor; NaN is not equal to itself)."""
    a, b = _as_tensor(input).data, _as_tensor(other).data
    if backend.device_of(a) != backend.device_of(b):
        raise OpError(
            f"equal: tensors on two devices ({backend.device_of(a)} and {backend.device_of(b)})"
        )
    xp = backend.get_array_module(a)
    return bool(a.shape == b.shape and xp.array_equal(a, b))


def repeat_interleave(input: Any, repeats: Any, dim: int | None = None) -> Tensor:  # noqa: A002
    """Each element repeated `repeats` times along `dim`, as `torch.repeat_interleave`
    (`[1, 2]` twice each: `[1, 1, 2, 2]`); `repeats` an int or one count per element of that
    axis; without `dim` the flattened input. An index_select, so gradients flow back."""
    x = _as_tensor(input)
    if dim is None:
        x, dim = x.reshape(-1), 0
    if x.ndim == 0:  # a 0-d tensor repeats as a 1-element one, as in PyTorch
        x = x.reshape(1)
    if (
        isinstance(dim, bool)
        or not isinstance(dim, (int, np.integer))
        or not -x.ndim <= dim < x.ndim
    ):
        raise OpError(f"repeat_interleave: dim {dim} is out of range for shape {x.shape}")
    n = x.shape[dim]
    counts = np.asarray(repeats.tolist() if isinstance(repeats, Tensor) else repeats)
    if (
        counts.dtype.kind not in "iu"
        or counts.ndim > 1
        or counts.size not in (1, n)
        or (counts < 0).any()
    ):
        raise OpError(
            f"repeat_interleave: repeats must be a count >= 0 or {n} of them (one per element "
            f"along dim {dim}), got {repeats!r}"
        )
    index = np.repeat(np.arange(n), counts.reshape(-1))
    return x.index_select(dim, index)


def bernoulli(input: Any, p: float | None = None, *, generator: Any = None) -> Tensor:  # noqa: A002
    """0s and 1s of `input`'s shape and dtype, each 1 with the probability held in `input`
    (or `p`), as `torch.bernoulli`; drawn on the host by tinyformer's generator (or
    `generator`), then put on input's device. No gradient: a draw is not differentiable."""
    from tinyformer import random

    data = input.data if isinstance(input, Tensor) else np.asarray(input)
    probs = np.asarray(backend.to_host(data), np.float64)
    if p is not None:
        probs = np.full(probs.shape, p, np.float64)
    if probs.dtype.kind != "f" or not ((probs >= 0) & (probs <= 1)).all():
        raise ValueError("bernoulli: the probabilities must lie in [0, 1]")
    draws = random.numpy_generator(generator).random(probs.shape) < probs
    dtype = data.dtype if data.dtype.kind == "f" else np.float32
    out = draws.astype(dtype)
    return Tensor(
        backend.to_device(out, backend.device_of(data)) if backend.is_device_array(data) else out
    )


def set_printoptions(
    precision: int | None = None,
    threshold: int | None = None,
    edgeitems: int | None = None,
    linewidth: int | None = None,
    profile: str | None = None,
    sci_mode: bool | None = None,
) -> None:
    """How tensors print, as `torch.set_printoptions`: digits after the point, how many
    elements print in full before the middle is elided (`threshold`, `edgeitems`), the line
    width; `profile` "default", "short" or "full" sets all four; sci_mode=False prints small
    numbers as 0 rather than in scientific notation. NumPy's own options are left alone."""
    from tinyformer.array_facts import PRINT_OPTIONS

    profiles = {
        "default": dict(precision=4, threshold=1000, edgeitems=3, max_line_width=80),
        "short": dict(precision=2, threshold=1000, edgeitems=2, max_line_width=80),
        "full": dict(precision=4, threshold=2**62, edgeitems=3, max_line_width=80),
    }
    if profile is not None:
        if profile not in profiles:
            raise ValueError(
                f"set_printoptions: profile must be one of {list(profiles)}, got {profile!r}"
            )
        PRINT_OPTIONS.update(profiles[profile])
    given = dict(
        precision=precision, threshold=threshold, edgeitems=edgeitems, max_line_width=linewidth
    )
    for name, value in given.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"set_printoptions: {name} must be a whole number >= 0, got {value!r}")
        PRINT_OPTIONS[name] = value
    if sci_mode is not None:
        PRINT_OPTIONS["suppress_small"] = not sci_mode


def compile(model: Any = None, **options: Any) -> Any:  # noqa: A001
    """`torch.compile`, as PyTorch 2 tutorials call it (`model = torch.compile(model)`, or as a
    decorator): tinyformer runs every op eagerly and has no compiler, so this returns `model`
    (a module or a function) as it is, and its options change nothing. The speed comes from
    the kernels each op already dispatches to."""
    if model is None:  # @torch.compile(mode=...) : a decorator
        return lambda fn: fn
    if not callable(model):
        raise TypeError(f"compile: expected a module or a function, got {type(model).__name__}")
    return model
