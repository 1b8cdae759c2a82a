"""PyTorch's spellings, accepted beside NumPy's, so that code copied from PyTorch runs.

- `dim=` for `axis=` and `keepdim=` for `keepdims=`: `F.softmax(x, dim=-1)`,
  `x.sum(dim=1, keepdim=True)`, `tf.cat(xs, dim=-1)`. PyTorch takes NumPy's names the same way
  (`torch.sum(x, axis=0, keepdims=True)` works there), so either spelling runs in both.
- `x.size()`: NumPy's `x.size` is the element count, PyTorch's `x.size()` the shape.
  `ElementCount` is both: an int that returns the shape when called.
- Tensor methods PyTorch code calls and NumPy has under other names or not at all
  (`TorchSpellings`: `x.dim()`, `x.numel()`, `x.float()`, `x.long()`, `x.int()`, `x.bool()`,
  `x.type()`, `x.clamp()`, `x.to(dtype)`, `x.repeat()`, `x.unbind()`, `x.flip()`,
  `x.new_zeros()`, `x.gt()`, `x.nonzero()`, `x.narrow()`, `x.index_select()`, `x.sort()`,
  ...). Methods that call an op (`x.sin()`, `x.prod(dim=)`, ...) live in tensor.py, beside
  the import of the ops; this module only spells.

`max` and `min` with PyTorch's `dim=` return PyTorch's (values, indices) pair
(`x.max(dim=1).indices`, `values, idx = x.max(dim=1, keepdim=True)`); with NumPy's `axis=`
they return the values only, as NumPy and `torch.amax` do. Where values tie, the indices are
the first, as `argmax`'s; the values' gradient is `amax`'s (shared among ties).
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np

from tinyformer import backend

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = [
    "ElementCount", "MaxResult", "TorchSpellings", "max_method_names", "max_names", "shape_arg",
    "torch_names",
]  # fmt: skip

Fn = TypeVar("Fn", bound=Callable[..., Any])

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}  # PyTorch's name -> tinyformer's


def shape_arg(shape: tuple) -> tuple[int, ...]:
    """Accept `f(x, 2, 3)` and `f(x, (2, 3))` alike, as PyTorch (and NumPy's reshape) do."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


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


class MaxResult(NamedTuple):
    """What `x.max(dim=...)` and `x.min(dim=...)` return, as PyTorch's
    `torch.return_types.max`: the values and, where they tie, the first index."""

    values: Tensor
    indices: Tensor


def max_names(fn: Fn, *, positional_dim: bool = False) -> Fn:
    """`fn` (max or min): with PyTorch's `dim=`, PyTorch's (values, indices) pair.

    positional_dim: an int in the first place after the tensor is PyTorch's `dim` as well
    (`x.max(1)`, `x.max(1, True)`), as the Tensor methods read it: `_, predicted =
    outputs.max(1)` is in every classification tutorial. The op `tf.ops.max(x, 1)` keeps
    NumPy's positional axis."""
    op = fn.__name__

    @functools.wraps(fn)
    def with_torch_pair(*args: Any, **kwargs: Any) -> Any:
        if positional_dim and len(args) >= 2 and _is_int(args[1]):
            if len(args) > 3:
                raise TypeError(f"{op}: takes dim and keepdim (PyTorch's), got {len(args) - 1}")
            if "dim" in kwargs or "axis" in kwargs:
                raise TypeError(f"{op}: got dim {args[1]!r} twice, by place and by name")
            if len(args) == 3:
                if "keepdim" in kwargs or "keepdims" in kwargs:
                    raise TypeError(f"{op}: got keepdim twice, by place and by name")
                kwargs["keepdim"] = args[2]
            args, kwargs = args[:1], {**kwargs, "dim": args[1]}
        if "keepdim" in kwargs and "dim" not in kwargs:  # x.max(1, keepdim=True): PyTorch's
            if len(args) < 2:
                raise TypeError(f"{op}: keepdim= goes with a dim (PyTorch's names)")
            args, kwargs = args[:1], {**kwargs, "dim": args[1]}
        if "dim" not in kwargs:
            return fn(*args, **kwargs)
        if "axis" in kwargs or "keepdims" in kwargs:
            raise TypeError(f"{op}: pass dim= and keepdim= (PyTorch's) or axis= and keepdims=")
        dim, keepdim = kwargs.pop("dim"), bool(kwargs.pop("keepdim", False))
        if dim is None or not isinstance(dim, int | np.integer):
            raise TypeError(f"{op}: dim= takes one axis (an int), got {dim!r}")
        x = args[0]
        values = fn(x, *args[1:], axis=dim, keepdims=keepdim, **kwargs)
        if not hasattr(x, "requires_grad"):  # `torch.max(outputs.data, dim=1)`: an array
            x = type(values)(x)
        indices = getattr(x, f"arg{op}")(axis=dim, keepdims=keepdim)
        return MaxResult(values, indices)

    return with_torch_pair  # type: ignore[return-value]


def max_method_names(fn: Fn) -> Fn:
    """`Tensor.max` and `Tensor.min`: `max_names` with PyTorch's positional dim."""
    return max_names(fn, positional_dim=True)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


class SortResult(NamedTuple):
    """What `x.sort()` returns, as PyTorch's `torch.return_types.sort`."""

    values: Tensor
    indices: Tensor


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


# PyTorch's legacy type names (`x.type()`), by NumPy dtype name.
_TYPE_NAMES = {
    "float16": "HalfTensor",
    "float32": "FloatTensor",
    "float64": "DoubleTensor",
    "int8": "CharTensor",
    "int16": "ShortTensor",
    "int32": "IntTensor",
    "int64": "LongTensor",
    "uint8": "ByteTensor",
    "bool": "BoolTensor",
}
_TYPE_DTYPES = {name: dtype for dtype, name in _TYPE_NAMES.items()}


def _type_name_dtype(name: str) -> tuple[str, str]:
    """("float32", "cpu") for "tinyformer.FloatTensor" or "torch.FloatTensor"; the device type
    for "tinyformer.cuda.FloatTensor" and the like."""
    parts = name.split(".")
    if len(parts) in (2, 3) and parts[0] in ("torch", "tinyformer") and parts[-1] in _TYPE_DTYPES:
        return _TYPE_DTYPES[parts[-1]], parts[1] if len(parts) == 3 else "cpu"
    raise ValueError(
        f"type: {name!r} names no tensor type; give a dtype (tf.float32, 'int64', np.float64) "
        "or a type name such as 'tinyformer.FloatTensor'"
    )


def _same_dtype(dtype: Any, other: np.dtype) -> bool:
    try:
        return np.dtype(dtype) == other
    except TypeError:
        return False


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

    nelement = numel  # PyTorch's older name, in makemore and many tutorials

    def tolist(self) -> Any:
        """The values as nested Python lists (a number for a 0-d tensor)."""
        return self.data.tolist()

    def contiguous(self) -> Tensor:
        """`self`: ops that need contiguous memory make it themselves (`reshape` copies when a
        view cannot be had), so there is nothing to do here; kept for PyTorch code."""
        return self

    @property
    def device(self) -> Any:
        """Where the data lives: `cpu`, `cuda:0`, ... (a `tinyformer.backend.Device`)."""
        return backend.device_of(self.data)

    def to(
        self, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False,
        copy: bool = False,
    ) -> Tensor:  # fmt: skip
        """`x.to(dtype)`, `x.to(device)`, `x.to(device, dtype)` or `x.to(other)` (other's device
        and dtype), as PyTorch's. The result is `x` itself when nothing changes (and not
        `copy`); otherwise a new tensor, differentiable across a dtype change. A tensor moved
        to another device is a new leaf (gradients do not flow between devices here).
        `non_blocking` (also PyTorch's third place, `copy` its fourth) changes nothing: copies
        here finish before `to` returns."""
        flags = [arg for arg in args if isinstance(arg, bool)]  # (non_blocking, copy) by place
        if len(flags) > 2:
            raise TypeError(f"to: takes non_blocking and copy after the dtype, got {args!r}")
        copy = copy or (len(flags) == 2 and flags[1])
        for arg in args:
            if isinstance(arg, bool):
                continue
            if hasattr(arg, "device") and hasattr(arg, "dtype") and not isinstance(arg, str):
                device, dtype = arg.device, arg.dtype
            elif backend.is_device_spec(arg):
                device = arg
            else:
                dtype = arg
        out = self
        if device is not None and backend.device(device) != self.device:
            out = type(self)(backend.to_device(self.data, device), requires_grad=False)
            out.requires_grad = self.requires_grad and out.data.dtype.kind == "f"
        if dtype is not None and not _same_dtype(dtype, out.dtype):
            out = out.astype(dtype)  # whose error names a dtype that is not one
        if copy and out is self:
            out = self.clone()
        return out

    def cuda(self, device: Any = None) -> Tensor:
        """`x.to("cuda")` (or `"cuda:<device>"`)."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def cpu(self) -> Tensor:
        """`x.to("cpu")`: a host copy of a device tensor, `x` itself on the host."""
        return self.to("cpu")

    def long(self) -> Tensor:
        """`x` as int64 (indices; no gradient flows through integers)."""
        return self.astype(np.int64)

    def int(self) -> Tensor:
        """`x` as int32, as PyTorch's `x.int()` (no gradient flows through integers)."""
        return self.astype(np.int32)

    def bool(self) -> Tensor:
        """`x` as booleans: True where nonzero (no gradient)."""
        return self.astype(np.bool_)

    def half(self) -> Tensor:
        """`x` as float16 (differentiable; NumPy computes float16 slowly, on the CPU)."""
        return self.astype(np.float16)

    def type(self, dtype: Any = None) -> Any:
        """With no argument, the tensor's type name in PyTorch's legacy form under tinyformer's
        name: "tinyformer.FloatTensor" for float32 on the CPU, "tinyformer.cuda.LongTensor" for
        int64 on a GPU (PyTorch says "torch.FloatTensor"). With a dtype (tf.int32, "float64",
        np.bool_) or such a type name (tinyformer's or torch's), `x` converted to it, as
        `x.to()`: `x` itself when nothing changes."""
        if dtype is None:
            kind = _TYPE_NAMES.get(str(self.dtype), f"{self.dtype}Tensor")
            where = "" if self.device.type == "cpu" else f"{self.device.type}."
            return f"tinyformer.{where}{kind}"
        if isinstance(dtype, str) and dtype.endswith("Tensor"):
            dtype, device = _type_name_dtype(dtype)
            return self.to(dtype) if self.device.type == device else self.to(device, dtype)
        return self.to(dtype)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
        """`x.clip(min, max)`, under PyTorch's name."""
        return self.clip(min, max)

    def float(self) -> Tensor:
        """`x` as float32 (`x.to("float32")`)."""
        return self.astype(np.float32)

    def double(self) -> Tensor:
        """`x` as float64."""
        return self.astype(np.float64)

    def type_as(self, other: Tensor) -> Tensor:
        """`x` in `other`'s dtype."""
        return self.astype(other.dtype)

    def expand_as(self, other: Tensor) -> Tensor:
        """`x` broadcast to `other`'s shape (a view; its gradient sums the copies)."""
        return self.expand(*other.shape)

    def t(self) -> Tensor:
        """The transpose of a matrix (a 0-d or 1-d tensor is returned as it is, as in PyTorch)."""
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor of at most 2 axes, got shape {self.shape}")
        return self if self.ndim < 2 else self.transpose(0, 1)

    def repeat(self, *sizes: Any) -> Tensor:
        """Tile `x`: axis i repeated sizes[i] times (`x.repeat(2, 1)` stacks two copies of a
        matrix). Extra leading sizes add axes. Built from unsqueeze, expand and reshape, so its
        gradient sums the copies."""
        sizes = shape_arg(sizes)
        if len(sizes) < self.ndim:
            raise ValueError(
                f"repeat: needs a size for each of the {self.ndim} axes of shape {self.shape}, "
                f"got {sizes}"
            )
        shape = (1,) * (len(sizes) - self.ndim) + tuple(self.shape)
        # (d0, d1, ...) -> (1, d0, 1, d1, ...) -> (s0, d0, s1, d1, ...) -> (s0 d0, s1 d1, ...)
        gaps = tuple(n for d in shape for n in (1, d))
        tiled = tuple(n for s, d in zip(sizes, shape) for n in (s, d))
        out = self.reshape(*gaps).expand(*tiled)
        return out.reshape(*(s * d for s, d in zip(sizes, shape)))

    def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
        """The slices along `dim`, that axis removed: one split (one graph node), not one
        indexing op per slice, each of whose backward would allocate a gradient of x's size."""
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"unbind: dim {dim} is out of range for shape {self.shape}")
        return tuple(piece.squeeze(dim) for piece in self.split(1, dim))

    def flip(self, *dims: Any) -> Tensor:
        """`x` reversed along `dims` (an int or a tuple of them)."""
        dims = shape_arg(dims)
        index = [slice(None)] * self.ndim
        for d in dims:
            if not -self.ndim <= d < self.ndim:
                raise IndexError(f"flip: dim {d} is out of range for shape {self.shape}")
            index[d] = slice(None, None, -1)
        return self[tuple(index)]

    def new_zeros(self, *size: Any, dtype: Any = None) -> Tensor:
        """A tensor of zeros of `size` on x's device, in x's dtype unless `dtype` is given."""
        return self._new("zeros", size, dtype)

    def new_ones(self, *size: Any, dtype: Any = None) -> Tensor:
        """A tensor of ones of `size` on x's device, in x's dtype unless `dtype` is given."""
        return self._new("ones", size, dtype)

    def new_tensor(self, data: Any, dtype: Any = None, requires_grad: bool = False) -> Tensor:
        """A copy of `data` on x's device, in x's dtype unless `dtype` is given."""
        src = data.data if hasattr(data, "grad_fn") else data  # a Tensor's array, or data
        xp = backend.get_array_module(src) if backend.is_device_array(src) else np
        array = xp.array(src, copy=True)
        return type(self)(
            array.astype(self.dtype if dtype is None else dtype, copy=False),
            requires_grad=requires_grad,
            device=self.device,
        )

    def _new(self, make: str, size: tuple, dtype: Any) -> Tensor:
        xp = backend.get_array_module(self.data)  # on x's device, as PyTorch's new_* are
        return type(self)(
            getattr(xp, make)(shape_arg(size), self.dtype if dtype is None else dtype)
        )

    # Comparisons by name (the operators give the same boolean tensors, with no gradient).
    def eq(self, other: Any) -> Tensor:
        return self == other

    def ne(self, other: Any) -> Tensor:
        return self != other

    def lt(self, other: Any) -> Tensor:
        return self < other

    def le(self, other: Any) -> Tensor:
        return self <= other

    def gt(self, other: Any) -> Tensor:
        return self > other

    def ge(self, other: Any) -> Tensor:
        return self >= other

    def narrow(self, dim: int, start: Any, length: int) -> Tensor:
        """The `length` slices of `dim` from `start` (a view, as `x[:, start:start + length]`
        for dim 1; differentiable)."""
        n = self._axis_length("narrow", dim)
        start = int(start) + (n if int(start) < 0 else 0)
        if not (0 <= start and 0 <= length and start + length <= n):
            raise IndexError(
                f"narrow: start {start} and length {length} do not fit in dim {dim} of length "
                f"{n} (shape {self.shape})"
            )
        return self[(slice(None),) * (dim % self.ndim) + (slice(start, start + length),)]

    def index_select(self, dim: int, index: Any) -> Tensor:
        """The slices `index` (a 1-D integer tensor) of `dim`, in that order (differentiable:
        a repeated index sums its gradients)."""
        n = self._axis_length("index_select", dim)
        if isinstance(index, TorchSpellings):  # a Tensor: its array, on its device
            array = index.data
        elif backend.is_device_array(index):
            array = index
        else:
            array = np.asarray(index)
        if array.ndim > 1 or array.dtype.kind not in "iu":
            raise IndexError(
                f"index_select: index must be a 1-D integer tensor, got {array.dtype} of shape "
                f"{array.shape}"
            )
        if array.size and not (-n <= int(array.min()) and int(array.max()) < n):
            raise IndexError(f"index_select: an index in {array.tolist()} is out of range "
                             f"for dim {dim} of length {n}")  # fmt: skip
        return self[(slice(None),) * (dim % self.ndim) + (array.reshape(-1),)]

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Any:
        """(values, indices) along `dim`, as `torch.sort`: the indices from `argsort`, the
        values gathered by them (so the gradient reaches the elements they came from)."""
        indices = self.argsort(dim, descending=descending, stable=stable)
        return SortResult(self.gather(dim, indices), indices)

    def _axis_length(self, op: str, dim: int) -> int:
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape {self.shape}")
        return self.shape[dim]

    def nonzero(self, *, as_tuple: bool = False) -> Any:
        """The coordinates of the nonzero elements, in row-major order: an int64 tensor of
        shape (count, ndim), or with `as_tuple` one 1-D tensor per axis (NumPy's nonzero,
        which indexes: `x[x.nonzero(as_tuple=True)]`). No gradient."""
        xp = backend.get_array_module(self.data)
        data = self.data.reshape(1) if self.ndim == 0 else self.data  # as PyTorch treats 0-d
        coords = [c.astype(np.int64) for c in xp.nonzero(data)]
        if as_tuple:
            return tuple(type(self)(c) for c in coords)
        if self.ndim == 0:
            return type(self)(xp.zeros((coords[0].size, 0), np.int64))
        return type(self)(xp.stack(coords, axis=1))

    def argwhere(self) -> Tensor:
        """`x.nonzero()`: the (count, ndim) coordinates of the nonzero elements."""
        return self.nonzero()

    @torch_names
    def all(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Whether every element (along `axis`) is nonzero: a boolean tensor, no gradient."""
        return type(self)(self.data.all(axis=axis, keepdims=keepdims))

    @torch_names
    def any(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Whether any element (along `axis`) is nonzero: a boolean tensor, no gradient."""
        return type(self)(self.data.any(axis=axis, keepdims=keepdims))
