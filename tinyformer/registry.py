"""The kernel registry: which implementation of a primitive runs, and why.

A primitive is a named array function such as `"softmax.forward"`. Every primitive has a NumPy
reference, registered in its op file with `@reference(name)`: the single source of truth. Fast
versions live in `tinyformer/kernels/<backend>/<op>.py` and register the same name with
`@kernel(name, backend=..., dtypes=...)`; dropping such a file in is all it takes to add one.

Choosing, on each call: a kernel of the preferred backend is used when one is registered for the
primitive and the input's dtype, the call is one the kernel can do (its `accepts` rule, e.g. a
stride of 1) and one where it pays (its `when` rule, e.g. a minimum size), else the reference.
The preference is, in order: the innermost `prefer(...)` block, the environment variable
`TINYFORMER_BACKEND` (read at the first dispatch, not at import), else "numba" for NumPy arrays.
`prefer(backend, force=True)` sets `when` aside, so that tests and benchmarks reach a kernel at
every size; nothing sets `accepts` aside, so a kernel never sees a call it cannot do and needs
no fallback of its own. `explain(name)` says what runs and why.

Threads: a parallel Numba kernel hands its rows to a pool of threads and waits for all of them,
and waking the pool costs tens of microseconds, more than a small call's work (an AdamW step on
a 27 x 27 parameter, a cross-entropy over 512 x 27 logits). So a kernel call whose work (the
elements of its first array; of the largest, for a list of arrays) is below its primitive's
measured threshold runs on the calling thread alone (Numba's thread count set to 1 around the
call; the kernels read it to size their work). The thresholds are data, measured on this machine
per primitive by `python -m benchmarks.one_thread`, which writes `tinyformer/thread_table.py`;
a primitive not in the table always uses the pool. A larger call runs on the threads that
`cores.threads()` grants: the cores other processes leave idle (Linux), else the whole pool.
Forced blocks use the pool at every size, so that the tests reach the kernels' parallel paths.

Kernel files are imported on the first dispatch. A backend whose library is not installed (no
numba, no cupy) is skipped silently, and the references run; any other error in a kernel file is
raised, because a broken kernel must not hide behind a silent fallback.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyformer import cores, runtime
from tinyformer.backend import array_module, is_emulated
from tinyformer.backend import device as parse_device

__all__ = [
    "REFERENCE",
    "backends",
    "call",
    "choose",
    "explain",
    "implementation",
    "kernel",
    "prefer",
    "primitives",
    "reference",
]

REFERENCE = "numpy"
# backend name -> the library it needs; a backend whose library is missing is skipped silently.
BACKEND_LIBRARIES = {"numba": "numba", "cuda": "cupy"}
ENV_VAR = "TINYFORMER_BACKEND"


@dataclass(frozen=True)
class Implementation:
    primitive: str
    backend: str
    fn: Callable[..., Any]
    dtypes: frozenset[np.dtype] | None  # None: any dtype
    when: Callable[..., bool] | None = None  # where it pays; forced blocks set it aside
    accepts: Callable[..., bool] | None = None  # the calls it can do at all; always honoured

    def supports(self, dtype: np.dtype) -> bool:
        return self.dtypes is None or dtype in self.dtypes


_table: dict[str, dict[str, Implementation]] = {}
_preferred: list[str] = []  # stack of prefer() blocks
_forced: list[bool] = []  # beside it: whether each block sets `when` rules aside
_state: dict[str, Any] = {"kernels_loaded": False, "env": None, "one_thread_below": {}}
# (primitive, dtype, array type, innermost prefer()) -> (the implementation, the reference, the
# work below which the implementation runs on one thread; 0: never): the choice made once, so
# that a call pays a dictionary lookup and the rules that read its arguments.
_cache: dict[tuple, tuple[Implementation, Implementation, int]] = {}


def reference(name: str) -> Callable[[Callable], Callable]:
    """Register `fn` as the NumPy reference of primitive `name`."""

    def register(fn: Callable) -> Callable:
        _add(Implementation(name, REFERENCE, fn, None))
        return fn

    return register


def kernel(
    name: str,
    *,
    backend: str,
    dtypes: tuple[Any, ...],
    when: Callable[..., bool] | None = None,
    accepts: Callable[..., bool] | None = None,
) -> Callable[[Callable], Callable]:
    """Register `fn` as a `backend` kernel of primitive `name` for the given dtypes.

    Two predicates on the primitive's arguments (each docstring says its rule) send other calls
    to the reference: `accepts`, the calls the kernel can do at all (a stride of 1, heads that
    fit its tiles), always; `when`, the calls where it beats the reference (problems big
    enough to amortise its fixed costs), except inside `prefer(backend, force=True)`, which is
    how the tests and benchmarks reach it at every size.
    """

    def register(fn: Callable) -> Callable:
        types = frozenset(np.dtype(d) for d in dtypes)
        _add(Implementation(name, backend, fn, types, when, accepts))
        return fn

    return register


def _add(impl: Implementation) -> None:
    _table.setdefault(impl.primitive, {})[impl.backend] = impl
    _cache.clear()


def _check_backend(backend: str, where: str) -> None:
    known = sorted({REFERENCE, *BACKEND_LIBRARIES})
    if backend not in known:
        raise ValueError(f"{where}: unknown backend {backend!r}; choose from {known}")


def _load_kernels() -> None:
    """Import every kernel file once, read the environment preference, and apply the
    process settings (`runtime.apply_settings`)."""
    env = os.environ.get(ENV_VAR) or None
    if env is not None:  # checked before anything is loaded, so the next call checks again
        _check_backend(env, f"environment variable {ENV_VAR}")
    # Thread and memory settings the kernels need (runtime.py says which and why), before any
    # kernel loads a thread pool; a bad TINYFORMER_THREADS raises here, at every call.
    runtime.apply_settings()
    _state["kernels_loaded"] = True
    _state["env"] = env
    from tinyformer import thread_table

    _state["one_thread_below"] = dict(thread_table.ONE_THREAD_BELOW)
    if importlib.util.find_spec("tinyformer.kernels") is None:  # a source tree never installed
        return
    for backend, library in BACKEND_LIBRARIES.items():
        # CUDA kernel files import without CuPy (they compile on their first launch), so that
        # the fake device can run them through the CPU emulator.
        if backend != "cuda" and importlib.util.find_spec(library) is None:
            continue
        package = importlib.import_module(f"tinyformer.kernels.{backend}")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    _cache.clear()


def _preference(array: Any) -> tuple[str, str]:
    """The backend to try first, and where that preference came from."""
    on_gpu = type(array).__module__.startswith("cupy")
    if on_gpu or is_emulated(array):
        # Numba kernels read host memory, and a silent copy to the host would hide the cost:
        # a device array runs its own device's kernel or the reference, whatever is preferred.
        if _preferred and _preferred[-1] == REFERENCE:
            return REFERENCE, "prefer() block"
        if on_gpu:
            return "cuda", "default for CuPy arrays"
        # The fake device runs the CUDA kernels through the CPU emulator only when asked:
        # emulated, a kernel is far slower than the reference.
        if _preferred and _preferred[-1] == "cuda":
            return "cuda", "prefer() block (emulated on the fake device)"
        if _state["env"] == "cuda":
            return "cuda", f"environment variable {ENV_VAR} (emulated on the fake device)"
        return REFERENCE, "the fake device runs the references unless cuda is preferred"
    wanted, source = "numba", "default for NumPy arrays"
    if _preferred:
        wanted, source = _preferred[-1], "prefer() block"
    elif _state["env"]:
        wanted, source = _state["env"], f"environment variable {ENV_VAR}"
    if wanted == "cuda":  # a CUDA kernel reads device memory: host arrays run the reference
        return REFERENCE, f"{source} prefers cuda, whose kernels take device arrays only"
    return wanted, source


def _entry(name: str, array: Any) -> tuple[Implementation, Implementation, int]:
    """The cached choice for inputs like `array` (see `_cache`)."""
    if not _state["kernels_loaded"]:
        _load_kernels()
    dtype = getattr(array, "dtype", None)
    key = (name, dtype, type(array), _preferred[-1] if _preferred else None)
    entry = _cache.get(key)
    if entry is None:
        impls = _table.get(name)
        if impls is None:
            raise KeyError(f"no primitive named {name!r}; known: {', '.join(primitives())}")
        backend, _ = _preference(array)
        impl = impls.get(backend)
        if impl is None or dtype is None or not impl.supports(dtype):
            impl = impls[REFERENCE]
        below = _state["one_thread_below"].get(name, 0) if impl.backend == "numba" else 0
        entry = _cache[key] = (impl, impls[REFERENCE], below)
    return entry


def implementation(name: str, array: Any) -> Implementation:
    """The implementation of `name` that runs for an input like `array`."""
    return _entry(name, array)[0]


def _first(args: tuple) -> Any:
    """The argument that chooses: the first, or the first array of a list there."""
    first = args[0]
    if isinstance(first, (list, tuple)):
        first = first[0] if first else None
    return first


def work(array: Any) -> int:
    """A call's work, as the thread thresholds count it: the elements of its first argument,
    or of the largest array of a list there (a list's kernel runs once per array)."""
    if isinstance(array, (list, tuple)):
        return max((a.size for a in array), default=0)
    return getattr(array, "size", 0)


def choose(name: str, *args: Any, **kwargs: Any) -> Implementation:
    """The implementation a call of `name` with these arguments runs. It is chosen by the first
    argument, or by the first array of a list there (primitives over many tensors at once)."""
    impl, ref, _ = _entry(name, _first(args))
    if impl is ref:
        return impl
    if impl.accepts is not None and not impl.accepts(*args, **kwargs):
        return ref
    forced = bool(_forced) and _forced[-1]
    if impl.when is not None and not forced and not impl.when(*args, **kwargs):
        return ref
    return impl


def one_thread(name: str, *args: Any, **kwargs: Any) -> bool:
    """Whether a call of `name` with these arguments runs its kernel on one thread (see the
    module docstring, "Threads")."""
    impl, ref, below = _entry(name, _first(args))
    forced = bool(_forced) and _forced[-1]
    return (
        bool(below)
        and not forced
        and choose(name, *args, **kwargs) is impl
        and (work(args[0]) < below)
    )


def call(name: str, *args: Any, **kwargs: Any) -> Any:
    """Run primitive `name` with the implementation chosen for its arguments."""
    # `choose` and `one_thread` written out: this runs for every kernel call of a step.
    impl, ref, below = _entry(name, _first(args))
    if impl is ref:
        return ref.fn(*args, **kwargs)
    if impl.accepts is not None and not impl.accepts(*args, **kwargs):
        return ref.fn(*args, **kwargs)
    forced = bool(_forced) and _forced[-1]
    if impl.when is not None and not forced and not impl.when(*args, **kwargs):
        return ref.fn(*args, **kwargs)
    if impl.backend != "numba" or forced:
        return impl.fn(*args, **kwargs)
    share = 1 if below and work(args[0]) < below else cores.threads()
    if share:
        return runtime.on_threads(share, impl.fn, *args, **kwargs)
    return impl.fn(*args, **kwargs)


@contextlib.contextmanager
def prefer(backend: str, *, force: bool = False) -> Iterator[None]:
    """Prefer `backend` inside the block; `prefer("numpy")` forces every reference. A kernel
    still runs only where its `when` rule holds, unless `force` (tests, benchmarks)."""
    _check_backend(backend, "prefer")
    _preferred.append(backend)
    _forced.append(force)
    try:
        yield
    finally:
        _preferred.pop()
        _forced.pop()


def primitives() -> list[str]:
    if not _state["kernels_loaded"]:
        _load_kernels()
    return sorted(_table)


def backends(name: str) -> list[str]:
    """The backends that implement primitive `name`, the reference first."""
    if not _state["kernels_loaded"]:
        _load_kernels()
    return sorted(_table.get(name, {}), key=lambda b: (b != REFERENCE, b))


def _threads_why(name: str, below: int, work_size: int | None) -> str:
    """The thread rule of a numba kernel, for `explain`."""
    from tinyformer import thread_table

    source = f"measured {thread_table.MEASURED} by python -m benchmarks.one_thread"
    if _forced and _forced[-1]:
        return "; on the thread pool at every size (a forced prefer() block)"
    share = cores.threads()
    shared = f"; other processes keep cores busy: the pool runs on {share} now" if share else ""
    if not below:
        return f"; on the thread pool at every size ({name} has no one-thread threshold){shared}"
    rule = f"on one thread for calls whose work is under {below} elements, else on the pool"
    if work_size is None:
        return f"; {rule} ({source}){shared}"
    branch = "one thread" if work_size < below else "the thread pool"
    return f"; a call of {work_size} elements runs on {branch}: {rule} ({source}){shared}"


def explain(name: str, dtype: Any = np.float32, device: Any = None, size: int | None = None) -> str:
    """Say which implementation of `name` runs for an input of `dtype` on `device` (the host
    by default), and why; for a numba kernel, whether it runs on one thread or the pool (for a
    call whose first array has `size` elements, when given)."""
    array = array_module(device).empty(0, dtype)
    impl, _, below = _entry(name, array)
    wanted, source = _preference(array)
    available = ", ".join(
        f"{b} ({'any dtype' if i.dtypes is None else '/'.join(sorted(map(str, i.dtypes)))})"
        for b, i in sorted(_table[name].items())
    )
    if impl.backend == wanted:
        why = f"{wanted} is preferred ({source}) and supports {np.dtype(dtype)}"
        rules = [impl.accepts]
        if not (_forced and _forced[-1]):
            rules.append(impl.when)
        rules = [" ".join((r.__doc__ or r.__name__).split()) for r in rules if r is not None]
        if rules:  # one line each
            why += f", for calls where {' and '.join(rules)} (the reference runs for the others)"
        if impl.backend == "numba":
            why += _threads_why(name, below, size)
    elif wanted not in _table[name]:
        library = BACKEND_LIBRARIES.get(wanted)
        missing = library is not None and importlib.util.find_spec(library) is None
        why = f"{wanted} is preferred ({source}) but " + (
            f"{library} is not installed" if missing else f"has no kernel for {name}"
        )
    else:
        why = f"{wanted} is preferred ({source}) but its kernel does not support {np.dtype(dtype)}"
    where = f"{np.dtype(dtype)}" + ("" if device is None else f" on {parse_device(device)}")
    return f"{name} [{where}]: runs {impl.backend}; {why}. Registered: {available}."
