"""Grad mode and anomaly detection: the module state every op reads when it runs (as in
`torch.autograd.grad_mode`), changed only through the context managers here.

`no_grad()` stops ops from recording a graph (evaluation, parameter updates); `enable_grad()`
records again inside it; `inference_mode()` is PyTorch's faster `no_grad` for evaluation,
here the same as `no_grad` (nothing is recorded either way). Each is a context manager and a
decorator, with or without the parentheses (`@tf.no_grad()`, `@tf.inference_mode`).
`detect_anomaly()` makes every op check its outputs and gradients for
NaN and Inf, so that the error names the first op that produced one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyformer import backend

__all__ = [
    "check_finite", "detect_anomaly", "enable_grad", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled", "no_grad", "set_grad_enabled",
]  # fmt: skip

# Read by `Function.apply` and the backward engine on every call (tinyformer/autograd.py).
_grad_enabled = True
_anomaly_enabled = False
_inference_mode = False


class _GradMode:
    """Context manager and decorator that sets whether ops record a graph."""

    enabled: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # `@tf.no_grad` without parentheses, as PyTorch allows: the class is called with the
        # function, and returns the decorated function.
        if len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)

    def __enter__(self) -> None:
        global _grad_enabled
        self._prev = _grad_enabled
        _grad_enabled = self.enabled

    def __exit__(self, *exc: object) -> None:
        global _grad_enabled
        _grad_enabled = self._prev

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):  # noqa: N801 (named as in PyTorch)
    """Run ops without recording a graph (evaluation, parameter updates)."""

    enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Record a graph again inside a `no_grad` block."""

    enabled = True


class inference_mode(_GradMode):  # noqa: N801
    """Evaluation without a graph, as `torch.inference_mode(mode=True)`: here `no_grad`
    (PyTorch also skips its version counters inside; tinyformer's cost nothing to keep).
    `inference_mode(False)` changes nothing."""

    enabled = False

    def __init__(self, mode: bool = True) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        global _grad_enabled, _inference_mode
        self._prev = (_grad_enabled, _inference_mode)
        if self.mode:
            _grad_enabled, _inference_mode = False, True

    def __exit__(self, *exc: object) -> None:
        global _grad_enabled, _inference_mode
        _grad_enabled, _inference_mode = self._prev

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper


class set_grad_enabled(_GradMode):  # noqa: N801
    """Turn graph recording on or off, as `torch.set_grad_enabled(mode)`: at once when called,
    so `tf.set_grad_enabled(False)` alone switches it off; as a `with` block or decorator, back
    to what it was at the end."""

    def __init__(self, mode: bool) -> None:
        global _grad_enabled
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got {mode!r}")
        self.enabled, self._prev = bool(mode), _grad_enabled
        _grad_enabled = self.enabled

    def __enter__(self) -> None:  # already set when made
        pass

    def __call__(self, fn: Callable) -> Callable:
        global _grad_enabled
        _grad_enabled = self._prev  # as a decorator it applies only inside calls of fn
        mode = self.enabled

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


def is_grad_enabled() -> bool:
    return _grad_enabled


def is_inference_mode_enabled() -> bool:
    return _inference_mode


class detect_anomaly:  # noqa: N801
    """Raise at the first op whose forward output or backward gradient holds a NaN or an Inf.

    Every op checks its results while this is active, so the error names the op that produced the
    first non-finite value instead of the loss that finally shows it. Slow: use it to debug.
    """

    def __enter__(self) -> detect_anomaly:
        global _anomaly_enabled
        self._prev = _anomaly_enabled
        _anomaly_enabled = True
        return self

    def __exit__(self, *exc: object) -> None:
        global _anomaly_enabled
        _anomaly_enabled = self._prev


def check_finite(array: Any, op: str, where: str) -> None:
    data = array if backend.is_device_array(array) else np.asarray(array)
    xp = backend.get_array_module(data)
    if np.issubdtype(data.dtype, np.floating) and not xp.isfinite(data).all():
        n_nan, n_inf = int(xp.isnan(data).sum()), int(xp.isinf(data).sum())
        raise FloatingPointError(
            f"detect_anomaly: {op} produced {n_nan} NaN and {n_inf} Inf values in its {where} "
            f"(shape {data.shape}); it is the first op to do so."
        )
