"""More of PyTorch's Tensor methods, each built from other Tensor methods, so that its gradient
is theirs: `x.square()` is `x * x`, `x.log2()` is `x.log() / ln 2`, `x.mm(y)` is `x @ y` that
refuses what is not a matrix, `x.masked_select(mask)` is `x[mask]`, `x.movedim(0, -1)` a
`permute`, `x.tile(reps)` a `repeat`. Also what reads the array (`x.stride()`,
`x.is_contiguous()`, `x.element_size()`, `x.is_cuda`) and what computes data without a
gradient (`x.unique()`, `x.count_nonzero()`, `x.logical_and(y)`), as PyTorch's do.
`tinyformer/torch_functions_more.py` has each as a function too (`torch.square(x)`).

`x.stride()` is the NumPy array's, in elements: a view that NumPy makes and PyTorch copies
(`x.flip(0)`, a negative step) has a negative stride here.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tinyformer import backend
from tinyformer.array_facts import default_dtype
from tinyformer.torch_names import shape_arg

if TYPE_CHECKING:
    from tinyformer.tensor import Tensor

__all__ = ["TorchMethods"]


class TorchMethods:
    """PyTorch's Tensor methods made of other methods (`Tensor` inherits them)."""

    __slots__ = ()  # Tensor keeps a fixed set of attributes

    # -- what the array says ----------------------------------------------------------------

    @property
    def is_cuda(self) -> bool:
        """Whether the data lives on a CUDA GPU."""
        return self.device.type == "cuda"

    def is_contiguous(self, memory_format: Any = None) -> bool:
        """Whether the elements lie in row-major order without gaps (a transpose or an
        `expand` is not contiguous); row-major is the only layout here, so `memory_format`
        changes nothing."""
        return bool(self.data.flags.c_contiguous)

    def stride(self, dim: int | None = None) -> Any:
        """The step in elements between neighbours along each axis (a tuple), or along `dim`."""
        steps = tuple(s // self.data.itemsize for s in self.data.strides)
        if dim is None:
            return steps
        if not -self.ndim <= dim < self.ndim:
            raise IndexError(f"stride: dim {dim} is out of range for shape {self.shape}")
        return steps[dim]

    def element_size(self) -> int:
        """Bytes per element (4 for float32)."""
        return self.data.itemsize

    # -- math, from other methods (so the gradient comes with them) ----------------------------

    def square(self) -> Tensor:
        """`x * x` (booleans count as int64, as in PyTorch)."""
        x = self.long() if self.dtype == np.bool_ else self
        return x * x

    def reciprocal(self) -> Tensor:
        """`1 / x`, floating (integers give the default float dtype, as in PyTorch)."""
        return 1 / self

    def log2(self) -> Tensor:
        """The base-2 logarithm, correctly rounded (PyTorch's values, bar a rare last bit), with
        the gradient of `x.log() / ln 2`."""
        return _log_base(self, 2)

    def log10(self) -> Tensor:
        """The base-10 logarithm, correctly rounded (PyTorch's values, bar a rare last bit),
        with the gradient of `x.log() / ln 10`."""
        return _log_base(self, 10)

    def lerp(self, end: Any, weight: Any) -> Tensor:
        """`x + weight * (end - x)`, computed as PyTorch does: from `end` backwards where
        |weight| >= 0.5, so that weight 1 gives `end` exactly."""
        end = end if isinstance(end, TorchMethods) else self.new_tensor(end)
        if self.dtype != end.dtype:
            raise TypeError(f"lerp: expected end of dtype {self.dtype}, got {end.dtype}")
        span = end - self
        if not isinstance(weight, TorchMethods):
            if abs(weight) < 0.5:
                return self + weight * span
            return end - span * (1 - weight)
        near = weight.abs() < 0.5  # which formula PyTorch uses for each element
        low, high = self + weight * span, end - span * (1 - weight)
        # one of the two per element; masked_fill sends the other's gradient nowhere
        return low.masked_fill(~near, 0) + high.masked_fill(near, 0)

    def dot(self, other: Any) -> Tensor:
        """The inner product of two 1-D tensors of one length and dtype (a 0-d tensor)."""
        other = _check_product("dot", self, other, 1, 1)
        if self.shape != other.shape:
            raise ValueError(f"dot: vectors of lengths {self.shape[0]} and {other.shape[0]}")
        return self @ other

    def mv(self, vec: Any) -> Tensor:
        """The matrix (n, m) times the vector (m,): a vector (n,)."""
        vec = _check_product("mv", self, vec, 2, 1)
        if self.shape[1] != vec.shape[0]:
            raise ValueError(f"mv: a matrix {self.shape} cannot multiply a vector {vec.shape}")
        return self @ vec

    def mm(self, mat2: Any) -> Tensor:
        """The matrix product of (n, m) and (m, p): (n, p); no broadcasting (see `matmul`)."""
        mat2 = _check_product("mm", self, mat2, 2, 2)
        if self.shape[1] != mat2.shape[0]:
            raise ValueError(f"mm: shapes {self.shape} and {mat2.shape} cannot be multiplied")
        return self @ mat2

    # -- shapes ---------------------------------------------------------------------------------

    def masked_select(self, mask: Any) -> Tensor:
        """The elements where the boolean `mask` (broadcast with x) is true, in row-major
        order, as a 1-D tensor (`x[mask]`; the gradient goes back to where each came from)."""
        mask = _on_device("masked_select", mask, self)
        if mask.dtype != np.bool_:
            raise TypeError(f"masked_select: mask must be boolean, got {mask.dtype}")
        try:
            shape = np.broadcast_shapes(self.shape, mask.shape)
        except ValueError:
            raise ValueError(
                f"masked_select: mask of shape {mask.shape} does not broadcast with {self.shape}"
            ) from None
        x = self if self.shape == shape else self.expand(*shape)
        xp = backend.get_array_module(mask)
        return x[xp.broadcast_to(mask, shape)].reshape(-1)

    def movedim(self, source: Any, destination: Any) -> Tensor:
        """`x` with the axes `source` (an int or a sequence) moved to `destination`, the other
        axes keeping their order (a `permute`)."""
        src, dst = _dims(source), _dims(destination)
        if len(src) != len(dst):
            raise ValueError(f"movedim: {len(src)} source dims but {len(dst)} destination dims")
        src = [_axis("movedim", d, self.shape) for d in src]
        dst = [_axis("movedim", d, self.shape) for d in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise ValueError(f"movedim: repeated dim in {source!r} or {destination!r}")
        rest = iter(d for d in range(self.ndim) if d not in src)
        where = dict(zip(dst, src))
        return self.permute(*(where[i] if i in where else next(rest) for i in range(self.ndim)))

    moveaxis = movedim

    def swapaxes(self, axis0: int, axis1: int) -> Tensor:
        """`x` with two axes exchanged (`transpose(axis0, axis1)`)."""
        for d in (axis0, axis1):
            _axis("swapaxes", d, self.shape)
        return self.transpose(axis0, axis1)

    swapdims = swapaxes

    def unflatten(self, dim: int, sizes: Any) -> Tensor:
        """`x` with axis `dim` split into axes of `sizes` (one may be -1: what is left)."""
        axis = _axis("unflatten", dim, self.shape)
        sizes, n = tuple(sizes), self.shape[axis]
        known = math.prod(s for s in sizes if s != -1)
        free = sum(s == -1 for s in sizes)  # a -1 takes what the others leave
        fits = known == n if not free else known > 0 and n % known == 0
        if not sizes or free > 1 or not fits:
            raise ValueError(
                f"unflatten: sizes {sizes} do not fill dim {dim} of length {n} (shape {self.shape})"
            )
        return self.reshape(*self.shape[:axis], *sizes, *self.shape[axis + 1 :])

    def tile(self, *reps: Any) -> Tensor:
        """`x` repeated `reps[i]` times along axis i; fewer reps than axes are padded with 1s
        in front (where `repeat` would refuse them)."""
        reps = shape_arg(reps)
        return self.repeat(*(1,) * (self.ndim - len(reps)), *reps)

    def fliplr(self) -> Tensor:
        """`x` reversed along axis 1 (left to right); needs at least 2 axes."""
        if self.ndim < 2:
            raise ValueError(f"fliplr: needs at least 2 axes, got shape {self.shape}")
        return self.flip(1)

    def flipud(self) -> Tensor:
        """`x` reversed along axis 0 (up to down); needs at least 1 axis."""
        if self.ndim < 1:
            raise ValueError("flipud: needs at least 1 axis, got a 0-d tensor")
        return self.flip(0)

    def broadcast_to(self, *shape: Any) -> Tensor:
        """`x.expand(shape)`: a view of x at a larger shape (-1 keeps an axis)."""
        return self.expand(*shape)

    def nan_to_num(
        self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None
    ) -> Tensor:
        """`x` with NaN, +inf and -inf replaced (by 0 and the dtype's largest and smallest
        numbers, unless given); the replaced elements get no gradient."""
        if self.dtype.kind != "f":
            return self.clone()  # integers hold none of them
        info = np.finfo(self.dtype)
        posinf = info.max if posinf is None else posinf
        neginf = info.min if neginf is None else neginf
        xp = backend.get_array_module(self.data)
        out = self
        for mask, value in (
            (xp.isnan(self.data), nan),
            (xp.isposinf(self.data), posinf),
            (xp.isneginf(self.data), neginf),
        ):
            out = out.masked_fill(type(self)(mask), value)
        return out

    # -- new tensors ----------------------------------------------------------------------------

    def new_full(
        self, size: Any, fill_value: Any, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False,
    ) -> Tensor:  # fmt: skip
        """A tensor of `size` filled with `fill_value`, on x's device and in x's dtype unless
        given."""
        xp = backend.array_module(self.device if device is None else device)
        shape = shape_arg((size,))  # an int or a sequence of them
        array = xp.full(shape, fill_value, self.dtype if dtype is None else dtype)
        return type(self)(array, requires_grad=requires_grad)

    def new_empty(
        self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False
    ) -> Tensor:
        """A tensor of `size` to be overwritten, on x's device and in x's dtype unless given:
        zeros, as `tf.empty` (PyTorch leaves whatever the memory held)."""
        return self.new_full(
            shape_arg(size), 0, dtype=dtype, device=device, requires_grad=requires_grad
        )

    # -- data without a gradient ----------------------------------------------------------------

    def unique(
        self, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
        dim: int | None = None,
    ) -> Any:  # fmt: skip
        """The distinct elements, ascending (also with sorted=False, whose order PyTorch leaves
        unspecified); with `return_inverse` the index of each element's value among them (x's
        shape), with `return_counts` how often each occurs. No gradient (PyTorch's backward
        is not implemented either)."""
        if dim is not None:
            raise NotImplementedError(
                f"unique: dim={dim} (unique slices) is not supported; unique elements only "
                "(dim=None)"
            )
        xp = backend.get_array_module(self.data)
        values, inverse, counts = xp.unique(
            self.data.reshape(-1), return_inverse=True, return_counts=True
        )
        out = [type(self)(values)]
        if return_inverse:
            out.append(type(self)(inverse.reshape(self.shape).astype(np.int64)))
        if return_counts:
            out.append(type(self)(counts.astype(np.int64)))
        return out[0] if len(out) == 1 else tuple(out)

    def count_nonzero(self, dim: Any = None) -> Tensor:
        """How many elements (along `dim`, an int or a tuple) are nonzero: int64."""
        xp = backend.get_array_module(self.data)
        axis = None if dim is None else tuple(_axis("count_nonzero", d, self.shape)
                                                for d in _dims(dim))  # fmt: skip
        return type(self)(xp.asarray((self.data != 0).sum(axis=axis), dtype=np.int64))

    def logical_and(self, other: Any) -> Tensor:
        """True where both are nonzero (any dtypes; a boolean tensor, no gradient)."""
        return _logical("logical_and", self, other)

    def logical_or(self, other: Any) -> Tensor:
        """True where either is nonzero (any dtypes; a boolean tensor, no gradient)."""
        return _logical("logical_or", self, other)

    def logical_xor(self, other: Any) -> Tensor:
        """True where exactly one is nonzero (any dtypes; a boolean tensor, no gradient)."""
        return _logical("logical_xor", self, other)


def _axis(op: str, dim: Any, shape: tuple[int, ...]) -> int:
    """`dim` as an axis in 0..ndim-1, or an IndexError naming op and shape."""
    ndim = len(shape)
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {dim!r}")
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor of shape {shape}")
    return int(dim) % max(ndim, 1)


def _dims(dims: Any) -> tuple[Any, ...]:
    return tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)


def _on_device(op: str, value: Any, like: Any) -> Any:
    """`value` as an array on `like`'s device: a Tensor's array (which must be there), or data."""
    if isinstance(value, TorchMethods):
        backend.check_same_device(op, like.data, value.data)
        return value.data
    if backend.is_device_array(value):
        return value
    return backend.to_device(np.asarray(value), like.device)


def _check_product(op: str, x: Any, y: Any, x_ndim: int, y_ndim: int) -> Any:
    """`y` as a tensor, after checking both operands' ranks and dtypes (PyTorch's rules)."""
    y = y if isinstance(y, TorchMethods) else x.new_tensor(y)
    names = {1: "a vector (1-D)", 2: "a matrix (2-D)"}
    for which, t, ndim in (("input", x, x_ndim), ("other", y, y_ndim)):
        if t.ndim != ndim:
            raise ValueError(f"{op}: {which} must be {names[ndim]}, got shape {t.shape}")
    if x.dtype != y.dtype:
        raise TypeError(f"{op}: expected both operands of one dtype, got {x.dtype} and {y.dtype}")
    return y


def _log_base(x: Any, base: int) -> Tensor:
    """log_base(x) with PyTorch's values and the gradient 1 / (x ln base).

    `x.log() / ln base` alone is off by an ulp in about a third of float32 results
    (log2(8) is not exactly 3) and gives log10(1000) = 2.9999999999999996 in float64. So its
    value is moved onto NumPy's log2 or log10 by adding the difference as a constant: the two
    lie within a factor of 2, so the difference and the sum are exact (Sterbenz's lemma)."""
    if x.dtype.kind != "f":
        x = x.astype(default_dtype())  # integers: the default float dtype, as in PyTorch
    approx = x.log() / math.log(base)
    xp = backend.get_array_module(x.data)
    wide = x.data.astype(np.float64)  # rounded to float32 after: as good as a float32 log gets
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = (xp.log2(wide) if base == 2 else xp.log10(wide)).astype(x.dtype)
        fix = xp.where(exact == approx.data, 0, exact - approx.data).astype(x.dtype)
    return approx + fix


def _logical(name: str, x: Any, y: Any) -> Tensor:
    other = _on_device(name, y, x)
    return type(x)(getattr(backend.get_array_module(x.data), name)(x.data, other))
