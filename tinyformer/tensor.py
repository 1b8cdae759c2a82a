"""`Tensor`: an n-dimensional array plus what autograd needs (`requires_grad`, `grad`, `grad_fn`).

The array lives in `.data`: a NumPy array, or a device array (CuPy's on a GPU, or the fake
device's in tests; `tinyformer.backend`), which stays where it is. Every method that computes
something forwards to a function in `tinyformer.ops`, so each op is written once, in its own file.
What only reads the array (`x.shape`, `x.item()`, `len(x)`, `repr(x)`) comes from the mixin in
`array_facts.py`, which also turns data into the array (Python data becomes float32 by default,
as in PyTorch; NumPy arrays keep their dtype). PyTorch's spellings (`dim=`, `x.size()`,
`x.float()`, ...) come from `torch_names.py`, the in-place ops (`x.add_(y)`, `x[i] = v`,
`x.zero_()`, ...) from `inplace.py`, whose writes into a graph are recorded through the
IndexPut op.

Where a new Tensor method goes: the first of these questions it answers yes to.
1. Does it write into the tensor's own array (`x.add_(y)`, `x[i] = v`)? `inplace.py`.
2. Does it call an op (`x.sin()`, `x @ y`, `x.sum(axis)`) or touch the graph (`backward`,
   `detach`, `retain_grad`)? Here, beside the import of the ops.
3. Is it PyTorch's name for what another method or the array already gives (`x.dim()`,
   `x.float()`, `x.size()`)? `torch_names.py`.
4. Does it read the array, computing nothing new (`x.shape`, `x.item()`, `repr(x)`)?
   `array_facts.py`.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinyformer import backend, engine
from tinyformer.array_facts import ArrayFacts, as_array
from tinyformer.hooks import RemovableHandle
from tinyformer.inplace import InPlaceOps
from tinyformer.piecewise import PiecewiseMethods
from tinyformer.torch_methods import TorchMethods
from tinyformer.torch_names import TorchSpellings, max_method_names, torch_names

__all__ = ["Tensor"]


class Tensor(ArrayFacts, InPlaceOps, PiecewiseMethods, TorchSpellings, TorchMethods):
    """An array that can record the ops applied to it and differentiate through them.

    Args:
        data: array-like. A NumPy array is wrapped without a copy; Python data is converted.
        requires_grad: record ops on this tensor so that `backward()` fills its `.grad`.
        dtype: NumPy dtype to convert to.
    """

    # _output: which output of `grad_fn` this tensor is (0 unless the op returned several)
    # _hooks: functions called after a gradient is accumulated into this leaf's .grad
    # _grad_hooks: a leaf's `register_hook` functions (a non-leaf's live on its node)
    __slots__ = (
        "data", "grad", "grad_fn", "_output", "_requires_grad", "_hooks", "_grad_hooks",
        "__weakref__",
    )  # fmt: skip
    # NumPy must not treat a Tensor as an array in `ndarray + Tensor`: defer to our __radd__.
    __array_ufunc__ = None

    def __init__(
        self, data: Any, requires_grad: bool = False, dtype: Any = None, device: Any = None
    ) -> None:
        array = as_array(data, dtype)
        self.data = array if device is None else backend.to_device(array, device)
        self.grad: np.ndarray | None = None
        self.grad_fn = None
        self._output = 0
        self._requires_grad = False
        self._hooks = self._grad_hooks = None
        self.requires_grad = requires_grad

    @classmethod
    def _make(cls, data: np.ndarray, grad_fn: Any, output: int = 0) -> Tensor:
        """Fast constructor for op outputs: no conversion, no checks."""
        t = object.__new__(cls)
        t.data = data
        t.grad = None
        t.grad_fn = grad_fn
        t._output = output
        t._requires_grad = grad_fn is not None
        t._hooks = t._grad_hooks = None
        return t

    # -- autograd -------------------------------------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self.data.dtype.kind != "f":
            raise TypeError(
                f"only floating-point tensors can require gradients; this one is {self.dtype} "
                "(indices, masks and targets are not differentiable)"
            )
        if not value and self.grad_fn is not None:
            raise RuntimeError("requires_grad can only be changed on leaf tensors; use .detach()")
        self._requires_grad = bool(value)

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def backward(self, grad: Any = None, retain_graph: bool = False) -> None:
        """Accumulate the gradient of this tensor into the `.grad` of every leaf it depends on."""
        engine.backward(self, grad, retain_graph=retain_graph)

    def register_post_accumulate_grad_hook(self, hook: Any) -> None:
        """Call `hook(self)` each time backward has added a gradient into this leaf's `.grad`
        (how DistributedDataParallel starts averaging a gradient as soon as it is complete)."""
        if self.grad_fn is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors have .grad")
        self._hooks = [*(self._hooks or ()), hook]

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """Call `hook(grad)` with this tensor's gradient each time backward computes it, as
        `torch.Tensor.register_hook`: a tensor it returns replaces the gradient (for what flows
        on, and for a leaf's .grad), None keeps it. `.remove()` on the handle undoes it."""
        if not callable(hook):
            raise TypeError(f"register_hook: expected a function, got {type(hook).__name__}")
        if not self._requires_grad:
            raise RuntimeError(
                "register_hook: this tensor does not require grad, so no gradient will reach it"
            )
        if self.grad_fn is None:
            self._grad_hooks = hooks = self._grad_hooks or []
        else:
            node = self.grad_fn
            node._grad_hooks = node._grad_hooks or {}
            hooks = node._grad_hooks.setdefault(self._output, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def retain_grad(self) -> None:
        """Also fill `.grad` of this non-leaf tensor during backward (for inspection)."""
        if self.grad_fn is not None:
            node = self.grad_fn
            node._retained = {**(node._retained or {}), self._output: weakref.ref(self)}

    def detach(self) -> Tensor:
        """The same data, cut from the graph."""
        return Tensor._make(self.data, None)

    def _index_put(self, index: Any, value: Any) -> Tensor:
        """A write recorded in the graph (`InPlaceOps._put`): the IndexPut op's output."""
        return _ops.index_put(self, index, value)

    def requires_grad_(self, value: bool = True) -> Tensor:
        self.requires_grad = value
        return self

    # -- arithmetic sugar: each forwards to its op ---------------------------------------------

    def __add__(self, other: Any) -> Tensor:
        return _ops.add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _ops.add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _ops.sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _ops.sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _ops.mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _ops.mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _ops.div(other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _ops.div(self, other, rounding_mode="floor")

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _ops.div(other, self, rounding_mode="floor")

    def __mod__(self, other: Any) -> Tensor:
        return _ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Tensor:
        return _ops.remainder(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _ops.pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _ops.pow(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _ops.matmul(other, self)

    def __neg__(self) -> Tensor:
        return _ops.neg(self)

    def __abs__(self) -> Tensor:
        return _ops.abs(self)

    def __getitem__(self, index: Any) -> Tensor:
        return _ops.getitem(self, index)

    def __iter__(self) -> Iterator[Tensor]:
        # Without it Python iterates by indexing until an IndexError, and getitem's out-of-range
        # error is an OpError: `for row in x` and `q, k, v = qkv` failed at the end of axis 0.
        return (self[i] for i in range(len(self)))

    # Comparisons give boolean tensors, which carry no gradient.
    def __lt__(self, other: Any) -> Tensor:
        return Tensor._make(self.data < _data(other), None)

    def __le__(self, other: Any) -> Tensor:
        return Tensor._make(self.data <= _data(other), None)

    def __gt__(self, other: Any) -> Tensor:
        return Tensor._make(self.data > _data(other), None)

    def __ge__(self, other: Any) -> Tensor:
        return Tensor._make(self.data >= _data(other), None)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return Tensor._make(self.data == _data(other), None)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return Tensor._make(self.data != _data(other), None)

    __hash__ = object.__hash__

    # Logical and bitwise operators: logical on boolean tensors (masks: `causal & padding`,
    # `~mask`), bitwise on integer ones, as PyTorch's; no gradient.
    def __and__(self, other: Any) -> Tensor:
        return _bitwise("__and__", "&", self, other)

    def __rand__(self, other: Any) -> Tensor:
        return _bitwise("__rand__", "&", other, self)

    def __or__(self, other: Any) -> Tensor:
        return _bitwise("__or__", "|", self, other)

    def __ror__(self, other: Any) -> Tensor:
        return _bitwise("__ror__", "|", other, self)

    def __xor__(self, other: Any) -> Tensor:
        return _bitwise("__xor__", "^", self, other)

    def __rxor__(self, other: Any) -> Tensor:
        return _bitwise("__rxor__", "^", other, self)

    def __invert__(self) -> Tensor:
        return _bitwise("__invert__", "~", self)

    def logical_not(self) -> Tensor:
        """True where x is zero (False): a boolean tensor, whatever x's dtype."""
        return Tensor._make(self.data == 0, None)

    # -- methods: each forwards to its op -------------------------------------------------------

    def exp(self) -> Tensor:
        return _ops.exp(self)

    def log(self) -> Tensor:
        return _ops.log(self)

    def sqrt(self) -> Tensor:
        return _ops.sqrt(self)

    def abs(self) -> Tensor:
        return _ops.abs(self)

    def tanh(self) -> Tensor:
        return _ops.tanh(self)

    def sigmoid(self) -> Tensor:
        return _ops.sigmoid(self)

    def relu(self) -> Tensor:
        return _ops.relu(self)

    def clip(self, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
        return _ops.clip(self, min, max)

    @torch_names
    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.sum(self, axis, keepdims)

    @torch_names
    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.mean(self, axis, keepdims)

    @max_method_names
    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.max(self, axis, keepdims)

    @max_method_names
    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.min(self, axis, keepdims)

    @torch_names
    def var(
        self, axis: Any = None, keepdims: bool = False, correction: int = 1, *,
        unbiased: bool | None = None,
    ) -> Tensor:  # fmt: skip
        return _ops.var(self, axis, keepdims, correction=correction, unbiased=unbiased)

    @torch_names
    def std(
        self, axis: Any = None, keepdims: bool = False, correction: int = 1, *,
        unbiased: bool | None = None,
    ) -> Tensor:  # fmt: skip
        return _ops.std(self, axis, keepdims, correction=correction, unbiased=unbiased)

    @torch_names
    def logsumexp(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.logsumexp(self, axis, keepdims)

    @torch_names
    def softmax(self, axis: int = -1) -> Tensor:
        return _ops.softmax(self, axis)

    @torch_names
    def log_softmax(self, axis: int = -1) -> Tensor:
        return _ops.log_softmax(self, axis)

    def pow(self, exponent: Any) -> Tensor:
        return _ops.pow(self, exponent)

    def matmul(self, other: Any) -> Tensor:
        return _ops.matmul(self, other)

    def reshape(self, *shape: Any) -> Tensor:
        return _ops.reshape(self, *shape)

    view = reshape

    def permute(self, *axes: Any) -> Tensor:
        return _ops.permute(self, *axes)

    def transpose(self, axis0: int = -2, axis1: int = -1) -> Tensor:
        return _ops.transpose(self, axis0, axis1)

    @property
    def T(self) -> Tensor:  # noqa: N802
        """All axes reversed, as `numpy.ndarray.T`."""
        return _ops.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self) -> Tensor:  # noqa: N802
        """The last two axes swapped (a batch of matrices, each transposed), as PyTorch's."""
        if self.ndim < 2:
            raise ValueError(f"mT: needs at least 2 axes, got shape {self.shape}")
        return _ops.transpose(self, -2, -1)

    def expand(self, *shape: Any) -> Tensor:
        return _ops.expand(self, *shape)

    @torch_names
    def squeeze(self, axis: Any = None) -> Tensor:
        return _ops.squeeze(self, axis)

    @torch_names
    def unsqueeze(self, axis: int) -> Tensor:
        return _ops.unsqueeze(self, axis)

    @torch_names
    def split(self, split_size_or_sections: Any, axis: int = 0) -> list[Tensor]:
        return _ops.split(self, split_size_or_sections, axis)

    @torch_names
    def chunk(self, chunks: int, axis: int = 0) -> list[Tensor]:
        return _ops.chunk(self, chunks, axis)

    def masked_fill(self, mask: Any, value: float) -> Tensor:
        return _ops.masked_fill(self, mask, value)

    @torch_names
    def topk(self, k: int, axis: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
        return _ops.topk(self, k, axis, largest, sorted)

    @torch_names
    def gather(self, axis: int, index: Any) -> Tensor:
        return _ops.gather(self, axis, index)

    @torch_names
    def cumsum(self, axis: int) -> Tensor:
        return _ops.cumsum(self, axis)

    def tril(self, diagonal: int = 0) -> Tensor:
        return _ops.tril(self, diagonal)

    def triu(self, diagonal: int = 0) -> Tensor:
        return _ops.triu(self, diagonal)

    # -- ops under PyTorch's names (the rest of its spellings: torch_names.TorchSpellings) -----

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
        return _ops.flatten(self, start_dim, end_dim)

    def clone(self) -> Tensor:
        return _ops.clone(self)

    def astype(self, dtype: Any) -> Tensor:
        return _ops.astype(self, dtype)

    @torch_names
    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _ops.argmax(self, axis, keepdims)

    @torch_names
    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        return _ops.argmin(self, axis, keepdims)

    @torch_names
    def argsort(self, axis: int = -1, descending: bool = False, stable: bool = False) -> Tensor:
        return _ops.argsort(self, axis, descending, stable)

    # -- math ops that PyTorch also has as methods ----------------------------------------------

    def add(self, other: Any, *, alpha: float = 1) -> Tensor:
        """`x + alpha * other`."""
        return _ops.add(self, other if alpha == 1 else other * alpha)

    def sub(self, other: Any, *, alpha: float = 1) -> Tensor:
        """`x - alpha * other`."""
        return _ops.sub(self, other if alpha == 1 else other * alpha)

    def mul(self, other: Any) -> Tensor:
        return _ops.mul(self, other)

    def div(self, other: Any, *, rounding_mode: str | None = None) -> Tensor:
        """`x / other`; with `rounding_mode` "trunc" or "floor", rounded (no gradient)."""
        return _ops.div(self, other, rounding_mode=rounding_mode)

    divide = div

    def remainder(self, other: Any) -> Tensor:
        """`x % other`, the sign of other's (Python's and PyTorch's)."""
        return _ops.remainder(self, other)

    @torch_names
    def scatter(
        self, axis: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
    ) -> Tensor:
        """A copy of x with `src` (a tensor, or a number) written at `index` along `axis`."""
        return _ops.scatter(self, axis, index, src, value=value, reduce=reduce)

    @torch_names
    def index_fill(self, axis: int, index: Any, value: Any) -> Tensor:
        """A copy of x with the slices `index` along `axis` set to `value`."""
        return _ops.masked_fill(self, _slices_mask(self, axis, index, "index_fill"), value)

    def sin(self) -> Tensor:
        return _ops.sin(self)

    def cos(self) -> Tensor:
        return _ops.cos(self)

    def rsqrt(self) -> Tensor:
        return _ops.rsqrt(self)

    def erf(self) -> Tensor:
        return _ops.erf(self)

    def log1p(self) -> Tensor:
        return _ops.log1p(self)

    @torch_names
    def prod(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.prod(self, axis, keepdims)

    @torch_names
    def amax(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.amax(self, axis, keepdims)

    @torch_names
    def amin(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return _ops.amin(self, axis, keepdims)

    @torch_names
    def norm(self, p: Any = 2, axis: Any = None, keepdims: bool = False) -> Tensor:
        """The p-norm over `axis` (`x.norm(p, dim=1)`); PyTorch's default "fro" is p = 2."""
        return _ops.norm(self, p, axis, keepdims)

    def roll(self, shifts: Any, dims: Any = None) -> Tensor:
        return _ops.roll(self, shifts, dims)

    def outer(self, other: Tensor) -> Tensor:
        return _ops.outer(self, other)


def _data(x: Any) -> Any:
    return x.data if isinstance(x, Tensor) else x


def _slices_mask(x: Tensor, axis: int, index: Any, op: str) -> Any:
    """A boolean mask, broadcasting to x, true on the slices `index` (integers) of `axis`."""
    ndim = max(x.ndim, 1)  # a 0-d tensor has one slice, as in PyTorch
    if not -ndim <= axis < ndim:
        raise IndexError(f"{op}: dim {axis} is out of range for a tensor of shape {x.shape}")
    if isinstance(index, Tensor):  # indices live with the data, as in PyTorch
        backend.check_same_device(op, x.data, index.data)
        index = index.data
    elif not backend.is_device_array(index):  # host data from the user: onto x's device
        index = backend.to_device(np.asarray(index), x.device)
    if index.dtype.kind not in "iu" or index.ndim > 1:
        raise IndexError(
            f"{op}: index must be a 0-d or 1-D integer tensor, got {index.dtype} of shape "
            f"{index.shape}"
        )
    length = x.shape[axis] if x.ndim else 1
    if index.size and not (-length <= int(index.min()) and int(index.max()) < length):
        raise IndexError(
            f"{op}: an index in {index.tolist()} is out of range for dim {axis} of length {length}"
        )
    mask = backend.get_array_module(x.data).zeros(length, dtype=bool)
    mask[index] = True
    if x.ndim == 0:
        return mask.reshape(())
    return mask.reshape((length,) + (1,) * (ndim - 1 - axis % ndim))


_BITWISE = {"&": operator.and_, "|": operator.or_, "^": operator.xor}


def _bitwise(name: str, symbol: str, x: Any, y: Any = None) -> Tensor:
    """`x symbol y` (or `~x`) on boolean or integer operands, as a tensor without gradient."""
    operands = (x,) if symbol == "~" else (x, y)
    for value in operands:
        # a Tensor's or an array's dtype (np.asarray would refuse a device array); a number's
        dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
        if dtype.kind not in "biu":
            example = "~(x > 0)" if symbol == "~" else f"(x > 0) {symbol} (y < 1)"
            raise RuntimeError(
                f"Tensor.{name}: {symbol} is logical on boolean tensors and bitwise on integer "
                f"ones, got {dtype}; for a mask of a float tensor compare first, as in {example}"
            )
    if symbol == "~":
        return Tensor._make(~_data(x), None)
    return Tensor._make(_BITWISE[symbol](_data(x), _data(y)), None)


# The ops need `Tensor` and the methods above need the ops: import them once Tensor exists.
from tinyformer import ops as _ops  # noqa: E402
