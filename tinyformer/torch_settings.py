"""Process settings under PyTorch's names: the default float dtype, the kernels' threads, and
deterministic algorithms.

- `set_default_dtype(tf.float64)`: what Python floats and the creation functions (`tensor`,
  `zeros`, `randn`, `arange` with floats, ...) make when no dtype is given, and what integer
  division gives; float16, float32 (the default) or float64, as in PyTorch. The `nn` layers
  keep float32 parameters (`model.double()` converts them).
- `set_num_threads(n)`: the most threads a parallel Numba kernel uses, Numba's count for the
  calling thread (PyTorch's count is the process's). The kernels may use fewer while other
  processes keep cores busy (`tinyformer.cores`); n above Numba's pool is the pool.
- `use_deterministic_algorithms(True)`: recorded and reported. tinyformer is deterministic
  already: its kernels split sums by the pool's size, not by the threads that run them, so
  one input gives one result to the bit.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from tinyformer import array_facts, runtime

__all__ = [
    "are_deterministic_algorithms_enabled", "get_default_dtype", "get_num_threads",
    "is_deterministic_algorithms_warn_only_enabled", "set_default_dtype", "set_num_threads",
    "use_deterministic_algorithms",
]  # fmt: skip

_FLOATS = ("float16", "float32", "float64")
_deterministic = {"mode": False, "warn_only": False}


def get_default_dtype() -> np.dtype:
    """The float dtype made when none is given (float32 unless `set_default_dtype` changed it;
    `tf.get_default_dtype() == tf.float32` holds)."""
    return array_facts.default_dtype()


def set_default_dtype(d: Any) -> None:
    """Make `d` (float16, float32 or float64) the default float dtype, process-wide."""
    try:
        dtype = np.dtype(d)
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in _FLOATS:
        raise TypeError(
            "set_default_dtype: only floating-point types can be the default "
            f"({', '.join(_FLOATS)}), got {d!r}"
        )
    array_facts.replace_default_dtype(dtype)


def _numba() -> Any:
    """Numba, with tinyformer's process settings applied first (they choose the threading layer
    and its spin, which Numba reads when it starts its pool); None when it is not installed."""
    runtime.apply_settings()
    if importlib.util.find_spec("numba") is None:
        return None
    import numba

    return numba


def get_num_threads() -> int:
    """The most threads a parallel kernel started from this thread uses (1 without Numba: the
    NumPy references then run, with BLAS on one thread)."""
    numba = _numba()
    return 1 if numba is None else int(numba.get_num_threads())


def set_num_threads(n: int) -> None:
    """Let the parallel kernels started from this thread use at most `n` threads (a positive
    int; more than Numba's pool means the whole pool)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads: expects a positive integer, got {n!r}")
    numba = _numba()
    if numba is not None:
        numba.set_num_threads(min(int(n), numba.config.NUMBA_NUM_THREADS))


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the request, as PyTorch's switch: tinyformer's ops give the same result to the bit
    for the same input already, so nothing else changes."""
    for name, value in (("mode", mode), ("warn_only", warn_only)):
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"use_deterministic_algorithms: {name} must be a bool, got {value!r}")
    _deterministic.update(mode=bool(mode), warn_only=bool(warn_only))


def are_deterministic_algorithms_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True)` is in force."""
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether `use_deterministic_algorithms(True, warn_only=True)` is in force."""
    return _deterministic["warn_only"]
