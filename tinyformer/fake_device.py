"""A fake GPU for tests: NumPy arrays that refuse to meet host arrays, as CuPy's arrays do.

CI has no GPU, yet most device bugs are host/device mixes that any machine can catch: an
`np.zeros` added to device data, `np.asarray` on a device array, `np.add.at` instead of
`xp.add.at`. A FakeArray holds a NumPy array and lets only explicit moves and `xp` touch it:

    from tinyformer.fake_device import to_fake, xp

    x = to_fake(np.ones((2, 3), np.float32))     # host -> device, explicit
    y = xp.exp(x - x.max(axis=-1, keepdims=True))  # what reference code does, through xp
    y.get()                                      # device -> host, explicit
    np.asarray(x)                                # TypeError, as with CuPy

Like CuPy: `__array__` raises CuPy's message; arithmetic and `xp` functions refuse `np.ndarray`
operands (0-d included) but take Python and NumPy scalars; reductions and integer
indexing give 0-d device arrays; `float()`, `.item()`, `bool()` and `len()` work, `__index__`
does not; `xp.lib.stride_tricks.as_strided` has no `writeable=`; no floating-point warnings
(0/0, overflow, log(0) give NaN and inf silently); ufunc methods (`xp.add.at`,
`.reduce`, ...) exist for the ufuncs CuPy implements them for; names CuPy lacks are absent.

Stricter than CuPy, so that references never lean on NumPy dispatch: NumPy functions and ufuncs
called on a FakeArray (`np.exp(x)`, `np.zeros_like(x)`, `np.add.at(x, ...)`) raise, where CuPy
dispatches many of them; host index arrays (`x[np.arange(3)]`) raise, where CuPy copies them to
the device; a host array assigned into a device array raises for any shape.

Not mimicked: out-of-range indices raise (CuPy wraps them silently), duplicate indices in an
assignment keep the last value (CuPy's is undefined), no asynchrony, streams, memory pools or
multiple devices; dtype promotion, printing and rounding are NumPy's; `xp.random` is NumPy's.

Importing this module registers the "fake" device with `tinyformer.backend` (`import tinyformer`
does it), so the rest of tinyformer reaches these arrays through the device layer alone.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tinyformer import backend, launches

__all__ = ["ABSENT_FROM_CUPY", "FakeArray", "memory", "to_fake", "xp"]

# Names that NumPy 2 has and CuPy 14's namespace lacks (read off cupy/__init__.py). `xp` refuses
# them so that code needing them fails in CI rather than on its first GPU run. Not exhaustive.
ABSENT_FROM_CUPY = frozenset(
    {
        "errstate", "seterr", "geterr", "seterrcall", "geterrcall", "nditer", "ndenumerate",
        "nested_iters", "frompyfunc", "matrix", "asmatrix", "bmat", "ma", "memmap", "rec",
        "recarray", "char", "strings", "emath", "ctypeslib", "longdouble", "clongdouble",
        "object_", "str_", "bytes_", "void", "datetime64", "timedelta64", "block", "insert",
        "geomspace", "einsum_path", "spacing", "vecdot", "vecmat", "matvec", "unstack",
        "nanquantile", "nanpercentile", "histogram_bin_edges", "polyder", "polydiv", "polyint",
    }
)  # fmt: skip

_IMPLICIT = (
    "Implicit conversion to a NumPy array is not allowed. "
    "Please use `.get()` to construct a NumPy array explicitly."
)
_SCALARS = (bool, int, float, complex, np.generic)  # usable with arrays on any device

# A NumPy scalar on the left of an operator (`np.float32(0.5) * x`) reaches the FakeArray as a
# call of one of these ufuncs; CuPy computes it, and so does the fake.
_OPERATOR_UFUNCS = frozenset(
    {
        np.add, np.subtract, np.multiply, np.true_divide, np.floor_divide, np.remainder,
        np.power, np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift,
    }
)  # fmt: skip
_COMPARISONS = frozenset(
    {np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal}
)
_OPERATOR_UFUNCS |= _COMPARISONS

# What FakeArray forwards to its NumPy array: attributes and methods cupy.ndarray has too.
# (`item`, `tolist` and the conversions read device memory: each is a sync on a real GPU.)
_ATTRIBUTES = frozenset(
    {"shape", "dtype", "ndim", "size", "strides", "flags", "itemsize", "nbytes", "T"}
)
_METHODS = frozenset(
    {
        "reshape", "transpose", "swapaxes", "ravel", "squeeze", "flatten", "view", "astype",
        "copy", "fill", "clip", "take", "repeat", "round", "dot", "nonzero", "sum", "mean",
        "prod", "var", "std", "max", "min", "argmax", "argmin", "any", "all", "cumsum",
        "cumprod", "sort", "argsort", "item", "tolist",
    }
)  # fmt: skip

# Ufunc methods CuPy implements, and for which ufuncs (None: every ufunc).
_CUPY_UFUNC_METHODS: dict[str, set[str] | None] = {
    "at": {"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"},
    "reduce": {"add", "multiply"}, "accumulate": {"add", "multiply"}, "reduceat": {"add"},
    "outer": None,
}  # fmt: skip


def _host_error(where: str) -> TypeError:
    return TypeError(
        f"{where}: a host numpy.ndarray met the fake device; move it there explicitly with "
        "xp.asarray(...) (CuPy refuses most such mixes, and the fake device refuses them all)"
    )


def _numpy_error(name: str) -> TypeError:
    return TypeError(
        f"numpy.{name} was called on a fake-device array: "
        f"write xp = get_array_module(x) and call xp.{name}"
    )


def _unwrap(obj: Any, where: str) -> Any:
    """FakeArrays -> their NumPy arrays, through tuples, lists and dicts; host arrays refused."""
    if isinstance(obj, FakeArray):
        return obj._a
    if isinstance(obj, np.ndarray):
        raise _host_error(where)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_unwrap(v, where) for v in obj)
    if isinstance(obj, dict):
        return {k: _unwrap(v, where) for k, v in obj.items()}
    return obj


def _wrap(obj: Any) -> Any:
    """NumPy results -> FakeArrays. NumPy scalars become 0-d arrays, as CuPy's reductions and
    integer indexing return 0-d device arrays, never host scalars."""
    if isinstance(obj, np.ndarray):
        return FakeArray(obj)
    if isinstance(obj, np.generic):
        return FakeArray(np.asarray(obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_wrap(v) for v in obj)
    return obj


_MATMUL = frozenset({"matmul", "dot", "einsum", "tensordot", "vdot", "inner"})
_TRANSFERS = frozenset({"item", "tolist"})
# Allocations: CuPy takes the memory from its pool and launches nothing (zeros and full do fill).
_ALLOCATIONS = frozenset({"empty", "empty_like"})


def _new_arrays(result: Any, inputs: list[np.ndarray], scalars: bool = True) -> bool:
    """Whether `result` holds an array that is not a view of an input (it took a launch).
    NumPy's scalars count as new 0-d arrays (a reduction's), unless `scalars` is False (an
    element read by integer indexing, a view on CuPy)."""
    found = result if isinstance(result, (tuple, list)) else [result]
    return any(
        (scalars and isinstance(r, np.generic))
        or (isinstance(r, np.ndarray) and not any(np.may_share_memory(r, a) for a in inputs))
        for r in found
    )


def _count(where: str, args: tuple, kwargs: dict, result: Any, owner: Any) -> None:
    """Record the launch CuPy would issue for this call, if any (see tinyformer.launches)."""
    name = where.rsplit(".", 1)[-1]
    if name in _TRANSFERS:
        launches.record("transfer")
        return
    if name in _ALLOCATIONS:
        return
    found = (owner, *args, *kwargs.values())
    inputs = [a._a for a in found if isinstance(a, FakeArray)]
    if "out" in kwargs or name == "fill" or _new_arrays(result, inputs):
        launches.record("matmul" if name in _MATMUL else "elementwise")


def _call(func: Callable, where: str, args: tuple, kwargs: dict, owner: Any = None) -> Any:
    """`func` on the unwrapped arguments (`owner`: the array whose method it is)."""
    with np.errstate(all="ignore"):  # CuPy never warns about 0/0, overflow, log(0), ...
        result = func(*_unwrap(args, where), **_unwrap(kwargs, where))
    if launches.active:
        _count(where, args, kwargs, result, owner)
    out = kwargs.get("out")
    if isinstance(out, FakeArray) and result is out._a:
        return out  # as CuPy does, hand back the `out` array itself
    return _wrap(result)


def _operand(other: Any, op: Callable) -> Any:
    """The NumPy value to compute with, or NotImplemented to let Python ask `other`."""
    if isinstance(other, np.ndarray):
        raise _host_error(f"operator.{op.__name__}")
    if isinstance(other, FakeArray):
        return other._a
    return other if isinstance(other, _SCALARS) else NotImplemented


def _binary(op: Callable, reflected: bool = False) -> Callable:
    def method(self: FakeArray, other: Any) -> Any:
        b = _operand(other, op)
        if b is NotImplemented:
            return NotImplemented
        if launches.active:
            launches.record("matmul" if op is operator.matmul else "elementwise")
        with np.errstate(all="ignore"):
            return _wrap(op(b, self._a) if reflected else op(self._a, b))

    return method


def _operators(op: Callable, inplace: Callable) -> tuple[Callable, Callable, Callable]:
    """x op y, y op x and x op= y (the last writes into x's memory, so views see it)."""

    def method(self: FakeArray, other: Any) -> Any:
        b = _operand(other, op)
        if b is NotImplemented:
            return NotImplemented
        if launches.active:
            launches.record("elementwise")
        with np.errstate(all="ignore"):
            inplace(self._a, b)
        return self

    return _binary(op), _binary(op, reflected=True), method


def _unary(op: Callable) -> Callable:
    def method(self: FakeArray) -> Any:
        if launches.active:
            launches.record("elementwise")
        with np.errstate(all="ignore"):
            return _wrap(op(self._a))

    return method


def _read(func: Callable) -> Callable:
    def method(self: FakeArray, *args: Any) -> Any:
        if launches.active:
            launches.record("transfer")  # a read of device memory: a sync on a GPU
        return func(self._a, *args)

    return method


class _FakeGpu:
    """The one fake GPU; like cupy.cuda.Device, it tells its number as `.id`."""

    id = 0

    def __repr__(self) -> str:
        return "<fake Device 0>"


class FakeArray:
    """An array on the fake device. Make one with `to_fake(host)` or `xp.asarray(host)`;
    `FakeArray(a)` wraps `a` without copying (for this module's use)."""

    __slots__ = ("_a",)

    def __init__(self, array: np.ndarray) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"FakeArray wraps a numpy.ndarray, got {type(array).__name__}")
        self._a = array

    device = property(lambda self: _FAKE_GPU, doc="The fake GPU, as cupy.ndarray.device.")

    def __getattr__(self, name: str) -> Any:
        # The ndarray attributes and methods that cupy.ndarray has too, forwarded to NumPy.
        if name in _ATTRIBUTES:
            return _wrap(getattr(self._a, name))
        if name in _METHODS:
            method = getattr(self._a, name)
            return lambda *args, **kwargs: _call(method, f"FakeArray.{name}", args, kwargs, self)
        raise AttributeError(f"'FakeArray' object has no attribute {name!r}")

    def get(self) -> np.ndarray:
        """A host copy (C order), as cupy.ndarray.get()."""
        if launches.active:
            launches.record("transfer")
        return self._a.copy(order="C")

    # Implicit host conversions: refused, as CuPy refuses them.
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(_IMPLICIT)

    def __array_function__(self, func: Callable, types: Any, args: Any, kwargs: Any) -> Any:
        raise _numpy_error(func.__name__)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc in _COMPARISONS:  # NumPy turns `np.float64(1) < x` into a 0-d array; so does CuPy
            inputs = tuple(
                v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v for v in inputs
            )
        if any(isinstance(v, np.ndarray) for v in inputs):
            raise _host_error(f"numpy.{ufunc.__name__}")
        scalar_first = len(inputs) == 2 and isinstance(inputs[0], np.generic)
        if method == "__call__" and ufunc in _OPERATOR_UFUNCS and scalar_first and not kwargs:
            return _wrap(ufunc(inputs[0], _unwrap(inputs[1], "")))
        raise _numpy_error(ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")

    # Python's protocols. Each of these reads device memory, a sync on a real GPU.
    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self) -> Iterator[FakeArray]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    __bool__, __float__, __int__ = _read(bool), _read(float), _read(int)
    __complex__, __str__, __format__ = _read(complex), _read(str), _read(format)

    def __repr__(self) -> str:
        return f"{np.array_repr(self._a)[:-1]}, device='fake:0')"

    def __copy__(self) -> FakeArray:
        return FakeArray(self._a.copy())

    def __deepcopy__(self, memo: dict) -> FakeArray:
        return self.__copy__()

    def __getitem__(self, key: Any) -> FakeArray:
        result = self._a[_unwrap(key, "indexing")]
        if launches.active and _new_arrays(result, [self._a], scalars=False):  # a gather
            launches.record("elementwise")
        return _wrap(result)

    def __setitem__(self, key: Any, value: Any) -> None:
        if launches.active:
            launches.record("elementwise")
        self._a[_unwrap(key, "indexing")] = _unwrap(value, "assignment")

    __add__, __radd__, __iadd__ = _operators(operator.add, operator.iadd)
    __sub__, __rsub__, __isub__ = _operators(operator.sub, operator.isub)
    __mul__, __rmul__, __imul__ = _operators(operator.mul, operator.imul)
    __truediv__, __rtruediv__, __itruediv__ = _operators(operator.truediv, operator.itruediv)
    __floordiv__, __rfloordiv__, __ifloordiv__ = _operators(operator.floordiv, operator.ifloordiv)
    __mod__, __rmod__, __imod__ = _operators(operator.mod, operator.imod)
    __pow__, __rpow__, __ipow__ = _operators(operator.pow, operator.ipow)
    __and__, __rand__, __iand__ = _operators(operator.and_, operator.iand)
    __or__, __ror__, __ior__ = _operators(operator.or_, operator.ior)
    __xor__, __rxor__, __ixor__ = _operators(operator.xor, operator.ixor)
    __lshift__, __rlshift__, __ilshift__ = _operators(operator.lshift, operator.ilshift)
    __rshift__, __rrshift__, __irshift__ = _operators(operator.rshift, operator.irshift)
    __matmul__, __rmatmul__ = _binary(operator.matmul), _binary(operator.matmul, reflected=True)
    __eq__, __ne__ = _binary(operator.eq), _binary(operator.ne)
    __lt__, __le__ = _binary(operator.lt), _binary(operator.le)
    __gt__, __ge__ = _binary(operator.gt), _binary(operator.ge)
    __neg__, __pos__ = _unary(operator.neg), _unary(operator.pos)
    __abs__, __invert__ = _unary(operator.abs), _unary(operator.invert)
    __hash__ = None  # mutable, and == is elementwise


_FAKE_GPU = _FakeGpu()


def to_fake(array: Any) -> FakeArray:
    """Copy host data (an ndarray, a NumPy scalar, nested lists) onto the fake device."""
    if isinstance(array, FakeArray):
        return array
    if launches.active:
        launches.record("transfer")
    return FakeArray(np.array(array, copy=True))


def memory(array: FakeArray) -> np.ndarray:
    """The host memory behind a fake-device array, not a copy: what the CUDA emulator hands its
    kernels as device pointers. Nothing else should reach through the fake device this way."""
    if not isinstance(array, FakeArray):
        raise TypeError(f"memory() takes a FakeArray, got {type(array).__name__}")
    return array._a


def _from_host_or_device(func: Callable) -> Callable:
    """xp.asarray and friends: the explicit door from host data to the device."""

    @functools.wraps(func)
    def call(obj: Any, *args: Any, **kwargs: Any) -> FakeArray:
        if isinstance(obj, FakeArray):
            result = func(obj._a, *args, **kwargs)
            if launches.active and _new_arrays(result, [obj._a]):  # a copy or a cast
                launches.record("elementwise")
            return _wrap(result)
        return to_fake(func(obj, *args, **kwargs))  # a transfer is always a copy

    return call


def _as_strided(x: FakeArray, shape: Any = None, strides: Any = None) -> FakeArray:
    """cupy.lib.stride_tricks.as_strided: no `subok`, no `writeable` (CuPy views are writable)."""
    if not isinstance(x, FakeArray):
        raise TypeError(f"as_strided: expected a fake-device array, got {type(x).__name__}")
    return FakeArray(np.lib.stride_tricks.as_strided(x._a, shape, strides))


def _function(func: Callable, where: str) -> Callable:
    @functools.wraps(func)
    def call(*args: Any, **kwargs: Any) -> Any:
        return _call(func, where, args, kwargs)

    return call


class _Ufunc:
    """xp.exp, xp.add, ...: a NumPy ufunc on fake-device arrays, with the methods CuPy has."""

    def __init__(self, ufunc: np.ufunc) -> None:
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _call(self._ufunc, f"xp.{self.__name__}", args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _CUPY_UFUNC_METHODS:
            return getattr(self._ufunc, name)  # nin, nout, identity, ...
        supported, method = _CUPY_UFUNC_METHODS[name], getattr(self._ufunc, name)
        where = f"xp.{self.__name__}.{name}"

        def call(*args: Any, **kwargs: Any) -> Any:
            if supported is not None and self.__name__ not in supported:
                raise NotImplementedError(f"`{self.__name__}.{name}` is not supported by CuPy")
            return _call(method, where, args, kwargs)

        return call


class _Namespace(types.ModuleType):
    """NumPy's namespace (or one of its submodules) as seen from the fake device: arguments are
    unwrapped, host arrays refused, array results wrapped."""

    def __init__(self, name: str, numpy_module: types.ModuleType, overrides: dict) -> None:
        super().__init__(name)
        self._numpy = numpy_module
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._overrides:
            return self._overrides[name]
        if self._numpy is np and name in ABSENT_FROM_CUPY:
            raise AttributeError(f"CuPy has no {name!r}, so neither has the fake device's xp")
        value = getattr(self._numpy, name)
        if isinstance(value, np.ufunc):
            return _Ufunc(value)
        if isinstance(value, types.ModuleType):
            return _Namespace(f"{self.__name__}.{name}", value, {})
        if callable(value) and not isinstance(value, type):
            return _function(value, f"xp.{name}")
        return value  # dtypes, scalar types, finfo and iinfo, constants such as pi and newaxis


_stride_tricks = _Namespace(
    "tinyformer.fake_device.xp.lib.stride_tricks",
    np.lib.stride_tricks,
    {"as_strided": _as_strided},
)
#: The fake device's array module, as `cupy` is CUDA's: `get_array_module(fake_array)` returns it.
xp = _Namespace(
    "tinyformer.fake_device.xp",
    np,
    {
        "ndarray": FakeArray,
        "asarray": _from_host_or_device(np.asarray),
        "asanyarray": _from_host_or_device(np.asanyarray),
        "array": _from_host_or_device(np.array),
        "lib": _Namespace(
            "tinyformer.fake_device.xp.lib", np.lib, {"stride_tricks": _stride_tricks}
        ),
    },
)

# The device layer knows this device only through this entry: the spine never imports this file.
backend.register_device_arrays(backend.DeviceArrays("fake", FakeArray, xp, to_fake, memory))
