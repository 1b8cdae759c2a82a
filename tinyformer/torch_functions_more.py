"""More of PyTorch's functions: those whose method is in torch_methods.py (`torch.square(x)` is
`x.square()`), and `bincount`, `hstack`, `vstack`, `searchsorted`, `bucketize`,
`logical_not`, `diff` and `cumprod`. Each takes a Tensor or array-like data.

Differentiable ones are built from differentiable ops (`hstack` is a `cat`, `diff` slices and
subtracts, `cumprod` multiplies slice by slice), so their gradients are those ops'. Counting
and searching (`bincount`, `searchsorted`, `bucketize`, `unique`, the logical tests) return
data, cut from the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tinyformer import backend, grad_mode, ops
from tinyformer.autograd import OpError
from tinyformer.tensor import Tensor

__all__ = [
    "bincount", "broadcast_to", "bucketize", "count_nonzero", "cumprod", "diff", "dot",
    "fliplr", "flipud", "hstack", "lerp", "log10", "log2", "logical_and", "logical_not",
    "logical_or", "logical_xor", "masked_select", "mm", "moveaxis", "movedim", "mv",
    "nan_to_num", "reciprocal", "searchsorted", "square", "swapaxes", "swapdims", "tile",
    "unflatten", "unique", "vstack",
]  # fmt: skip


def _as_tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x)


# -- the methods of torch_methods.py as functions ----------------------------------------------


def square(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).square()


def reciprocal(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).reciprocal()


def log2(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).log2()


def log10(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).log10()


def lerp(input: Any, end: Any, weight: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).lerp(end, weight)


def dot(input: Any, tensor: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).dot(tensor)


def mv(input: Any, vec: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).mv(vec)


def mm(input: Any, mat2: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).mm(mat2)


def masked_select(input: Any, mask: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).masked_select(mask)


def movedim(input: Any, source: Any, destination: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).movedim(source, destination)


moveaxis = movedim


def swapaxes(input: Any, axis0: int, axis1: int) -> Tensor:  # noqa: A002
    return _as_tensor(input).swapaxes(axis0, axis1)


swapdims = swapaxes


def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Tensor:  # noqa: A002
    return _as_tensor(input).unflatten(dim, sizes)


def tile(input: Any, dims: Sequence[int]) -> Tensor:  # noqa: A002
    return _as_tensor(input).tile(dims)


def fliplr(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).fliplr()


def flipud(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).flipud()


def broadcast_to(input: Any, size: Sequence[int]) -> Tensor:  # noqa: A002
    return _as_tensor(input).broadcast_to(size)


def unique(
    input: Any,  # noqa: A002
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    return _as_tensor(input).unique(sorted, return_inverse, return_counts, dim)


def count_nonzero(input: Any, dim: Any = None) -> Tensor:  # noqa: A002
    return _as_tensor(input).count_nonzero(dim)


def nan_to_num(
    input: Any,  # noqa: A002
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
) -> Tensor:
    return _as_tensor(input).nan_to_num(nan, posinf, neginf)


def logical_and(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).logical_and(other)


def logical_or(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).logical_or(other)


def logical_xor(input: Any, other: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).logical_xor(other)


def logical_not(input: Any) -> Tensor:  # noqa: A002
    return _as_tensor(input).logical_not()


# -- functions with no method here -------------------------------------------------------------


def hstack(tensors: Sequence[Any]) -> Tensor:
    """Side by side: 1-D tensors end to end (axis 0), others along axis 1; 0-d ones count as
    1-D (as `torch.hstack`: a `cat`, so gradients flow back)."""
    xs = [_atleast(_as_tensor(t), 1) for t in _sequence("hstack", tensors)]
    return ops.cat(xs, axis=0 if xs[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Any]) -> Tensor:
    """One above the other, along axis 0; a 1-D tensor of n counts as one row (1, n), a 0-d
    one as (1, 1) (as `torch.vstack`: a `cat`, so gradients flow back)."""
    return ops.cat([_atleast(_as_tensor(t), 2) for t in _sequence("vstack", tensors)], axis=0)


def _sequence(op: str, tensors: Any) -> list:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError(f"{op}: expects a non-empty list or tuple of tensors, got {tensors!r}")
    return list(tensors)


def _atleast(x: Tensor, ndim: int) -> Tensor:
    if x.ndim >= ndim:
        return x
    return x.reshape(*(1,) * (ndim - x.ndim), *x.shape)  # 0-d -> (1,) or (1, 1); (n,) -> (1, n)


def diff(
    input: Any,  # noqa: A002
    n: int = 1,
    dim: int = -1,
    prepend: Any = None,
    append: Any = None,
) -> Tensor:
    """The n-th forward difference along `dim`, `x[1:] - x[:-1]` applied n times, after
    `prepend` and `append` are joined on; booleans give `x[1:] != x[:-1]`, as in PyTorch.
    Slices and subtractions, so gradients flow back."""
    x = _as_tensor(input)
    if x.ndim == 0:
        raise OpError("diff: expects a tensor with at least 1 dim, got a 0-d tensor")
    if not -x.ndim <= dim < x.ndim:
        raise OpError(f"diff: dim {dim} is out of range for a tensor of shape {x.shape}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise OpError(f"diff: n must be an integer >= 0, got {n!r}")
    dim %= x.ndim
    pieces = [_as_tensor(p) for p in (prepend, x, append) if p is not None]
    x = ops.cat(pieces, axis=dim) if len(pieces) > 1 else x
    before = (slice(None),) * dim
    for _ in range(n):
        later, earlier = x[(*before, slice(1, None))], x[(*before, slice(None, -1))]
        x = later != earlier if x.dtype == np.bool_ else later - earlier
    return x


def cumprod(input: Any, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """Running products along `dim` (`[a, ab, abc, ...]`), as `torch.cumprod`: integers and
    booleans in int64. When a gradient is wanted, one multiplication per slice, whose
    gradients are right where an element is 0 or negative (exp(cumsum(log x)) is not)."""
    x = _as_tensor(input)
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind in "biu":
        x = x.long()
    scalar = x.ndim == 0
    if scalar:  # a 0-d tensor is its own running product along dim 0 or -1
        x = x.reshape(1)
    if not -x.ndim <= dim < x.ndim:
        raise OpError(f"cumprod: dim {dim} is out of range for a tensor of shape {x.shape}")
    dim %= x.ndim
    if x.shape[dim] == 0:
        out = x.clone()
    elif x.requires_grad and grad_mode.is_grad_enabled():
        running = []
        for piece in x.unbind(dim):  # one split; the products in cumprod's order
            running.append(piece if not running else running[-1] * piece)
        out = ops.stack(running, axis=dim)
    else:
        out = Tensor(backend.get_array_module(x.data).cumprod(x.data, axis=dim, dtype=x.dtype))
    return out.reshape(()) if scalar else out


def bincount(input: Any, weights: Any = None, minlength: int = 0) -> Tensor:  # noqa: A002
    """How often each value 0, 1, ..., max(input) occurs in the 1-D non-negative integers
    `input` (int64); with `weights` (one per element), their sums instead: in the weights'
    float dtype, float64 for integer weights, as in PyTorch. At least `minlength` bins.
    No gradient (to the weights either)."""
    x = _as_tensor(input)
    if x.ndim != 1 or x.dtype.kind not in "iu" or (x.numel() and int(x.data.min()) < 0):
        raise OpError(
            f"bincount: input must be 1-D non-negative integers, got {x.dtype} of shape "
            f"{x.shape}" + (f" with minimum {int(x.data.min())}" if x.numel() else "")
        )
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise OpError(f"bincount: minlength must be an integer >= 0, got {minlength!r}")
    xp = backend.get_array_module(x.data)
    if weights is None:
        return Tensor(xp.bincount(x.data, minlength=minlength).astype(np.int64))
    w = _as_tensor(weights)
    if w.shape != x.shape:
        raise OpError(f"bincount: weights of shape {w.shape} do not match input's {x.shape}")
    backend.check_same_device("bincount", x.data, w.data)
    dtype = w.dtype if w.dtype.kind == "f" else np.dtype(np.float64)
    return Tensor(xp.bincount(x.data, weights=w.data, minlength=minlength).astype(dtype))


def searchsorted(
    sorted_sequence: Any,
    input: Any,  # noqa: A002
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Any = None,
) -> Tensor:
    """Where each value of `input` would go in `sorted_sequence` to keep it sorted: the first
    such index, or with right=True (side="right") the last. A 1-D sequence takes values of any
    shape; an N-D one searches its rows, one per row of `input` (the leading dims must
    match). `sorter`: the indices that sort the sequence. int64 (int32 with out_int32)."""
    if side not in (None, "left", "right"):
        raise OpError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if side == "left" and right:
        raise OpError("searchsorted: side='left' and right=True ask for opposites")
    side = side or ("right" if right else "left")
    seq = _as_tensor(sorted_sequence).data
    scalar = not isinstance(input, Tensor) and np.ndim(input) == 0
    values = _as_tensor(input).data
    backend.check_same_device("searchsorted", seq, values)
    xp = backend.get_array_module(seq)
    if sorter is not None:
        order = _as_tensor(sorter).data
        if order.shape != seq.shape or order.dtype.kind not in "iu":
            raise OpError(
                f"searchsorted: sorter must be integers of the sequence's shape {seq.shape}, "
                f"got {order.dtype} of shape {order.shape}"
            )
        seq = xp.take_along_axis(seq, order, axis=-1)
    if seq.ndim == 1:
        out = xp.searchsorted(seq, values, side=side)
    elif scalar or seq.shape[:-1] != values.shape[:-1]:
        raise OpError(
            f"searchsorted: a sequence of shape {seq.shape} needs values with the same leading "
            f"dims {seq.shape[:-1]}, got shape {values.shape}"
        )
    else:
        rows = seq.reshape(-1, seq.shape[-1])
        wanted = values.reshape(-1, values.shape[-1])
        out = xp.stack([xp.searchsorted(r, v, side=side) for r, v in zip(rows, wanted)])
        out = out.reshape(values.shape)
    return Tensor(xp.asarray(out, dtype=np.int32 if out_int32 else np.int64))


def bucketize(
    input: Any,  # noqa: A002
    boundaries: Any,
    *,
    out_int32: bool = False,
    right: bool = False,
) -> Tensor:
    """The bucket of each value among the 1-D ascending `boundaries`: i such that
    boundaries[i-1] < x <= boundaries[i] (with right=True, boundaries[i-1] <= x <
    boundaries[i]), as `torch.bucketize`. int64 (int32 with out_int32), no gradient."""
    edges = _as_tensor(boundaries)
    if edges.ndim != 1:
        raise OpError(f"bucketize: boundaries must be 1-D, got shape {edges.shape}")
    return searchsorted(edges, input, out_int32=out_int32, side="right" if right else "left")
