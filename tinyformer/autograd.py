"""Reverse-mode automatic differentiation: `Function`, its `ctx`, and the backward engine.

Every differentiable op is a `Function` subclass with two static methods on raw arrays:

    forward(ctx, *arrays, **params) -> array, or a tuple of arrays (several outputs)
    backward(ctx, *gys)             -> one gradient (or None) per positional input of forward

`backward` takes one gradient per output of `forward`: `backward(ctx, gy)` for the usual single
output. As in PyTorch, an output that did not reach the loss gets a zero gradient.

`Function.apply(*inputs, **params)` unwraps Tensors, runs `forward`, and, when some input requires a
gradient, returns a Tensor whose `grad_fn` is the `ctx` of that call. The ctx is the node of the
graph: it remembers the Function, one edge per input (the input's own node, or the leaf tensor
itself), and whatever `forward` saved for the backward pass. It does not keep the inputs' values
alive unless `forward` saved them, so a graph costs only what its ops chose to save.

`Tensor.backward()` runs the engine (`engine.py`, which this module re-exports: `backward`,
`grad`, `Context`, `queue_callback`): the graph walk, readable before this module and `Tensor`.

`no_grad`, `enable_grad` and `detect_anomaly` live in `grad_mode.py` (re-exported here): the
module state that `apply` and the engine read on every call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, grad_mode, versions
from tinyformer.engine import Context, backward, grad, queue_callback
from tinyformer.grad_mode import (
    check_finite,
    detect_anomaly,
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from tinyformer.tensor import Tensor

__all__ = [
    "Context",
    "Function",
    "OpError",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "grad",
    "is_grad_enabled",
    "inference_mode",
    "is_inference_mode_enabled",
    "no_grad",
    "queue_callback",
    "set_grad_enabled",
]


class OpError(ValueError):
    """Bad input to an op; the message names the op and the offending shapes or values."""


class Function:
    """Base class of every differentiable op; subclass it and define the two static methods.

    Example:
        class Exp(Function):
            @staticmethod
            def forward(ctx, x):
                y = np.exp(x)
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, gy):
                (y,) = ctx.saved_tensors
                return gy * y

        y = Exp.apply(x)  # x is a Tensor; y.grad_fn is the ctx of this call
    """

    @staticmethod
    def forward(ctx: Context, *args: Any, **params: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, gy: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Any, **params: Any) -> Any:
        """Run `forward` on the inputs' arrays and record the call in the graph when needed.
        Returns a Tensor, or a tuple of Tensors when `forward` returned a tuple of arrays."""
        # One pass over the inputs, written out (not comprehensions): this runs for every op,
        # and at small sizes it is most of the op's time.
        enabled = grad_mode._grad_enabled
        arrays, needs, any_need, host = [], [], False, True
        for x in inputs:
            if isinstance(x, Tensor):
                a, need = x.data, enabled and x._requires_grad
                any_need = any_need or need
            else:
                a, need = x, False
            if type(a) is not np.ndarray:
                host = False
            arrays.append(a)
            needs.append(need)
        if not host:  # scalars, None, or device arrays
            backend.check_same_device(cls.__name__, *arrays)
        ctx = Context(cls, tuple(needs))
        try:
            y = cls.forward(ctx, *arrays, **params)
        except OpError:
            raise
        except (ValueError, IndexError) as e:
            shapes = ", ".join(str(getattr(a, "shape", type(a).__name__)) for a in arrays)
            raise OpError(f"{cls.__name__}: {e} (input shapes: {shapes})") from e
        several = isinstance(y, tuple)
        if several:
            ys = tuple(_as_output(a, cls.__name__) for a in y)
            differentiable = any(a.dtype.kind not in "biu" for a in ys)
        else:
            y = _as_output(y, cls)
            ys, differentiable = (y,), y.dtype.kind not in "biu"
        # Integer or boolean outputs only (a cast to int64, say): nothing to differentiate, as in
        # PyTorch, so no node; the gradient path stops here instead of flowing through a round.
        # Under no_grad, or when no input requires a gradient, nothing more is recorded either.
        if not (any_need and differentiable):
            if not several:
                return Tensor._make(y, None)
            return tuple(Tensor._make(a, None) for a in ys)
        parents, parent_outputs = [], []
        for x, need in zip(inputs, needs):
            if need:
                parents.append(x if x.grad_fn is None else x.grad_fn)
                parent_outputs.append(x._output)  # which output of its node (0 for leaves)
            else:
                parents.append(None)
                parent_outputs.append(0)
        ctx.parents, ctx.parent_outputs = tuple(parents), tuple(parent_outputs)
        ctx.outputs = tuple([(a.shape, a.dtype) for a in ys])
        # The in-place write count now: backward refuses to run on saved arrays that an in-place
        # op has changed since (tinyformer/versions.py).
        ctx._clock = versions.clock
        if grad_mode._anomaly_enabled:  # so that the error can say "input 0" or "output 0",
            ctx._saved_labels = versions.label_saved(ctx._saved, arrays, ys)
            ctx._call = (arrays, params)  # and gradcheck(localize=True) can rerun the op alone
        if not several:
            return Tensor._make(y, ctx)
        return tuple(Tensor._make(a, ctx, i) for i, a in enumerate(ys))


def _as_output(y: Any, op: Any) -> np.ndarray:
    """`y` as an op's output array; `op` is the Function or its name (named only on errors)."""
    if type(y) is np.ndarray and not grad_mode._anomaly_enabled:  # the usual case, at once
        return y
    op = op if isinstance(op, str) else op.__name__
    if isinstance(y, np.generic):  # NumPy reductions return scalars; keep arrays everywhere
        y = np.asarray(y)
    if isinstance(y, Tensor) or not hasattr(y, "shape") or not hasattr(y, "dtype"):
        # A Tensor here (PyTorch's forward returns one) would end up wrapped in another Tensor,
        # a list or a float without a dtype: each failed later, somewhere else.
        fix = "return its .data" if isinstance(y, Tensor) else "wrap it in np.asarray(...)"
        raise TypeError(
            f"{op}.forward returned a {type(y).__name__}; forward works on the inputs' arrays "
            f"and must return a NumPy array (or a tuple of them): {fix}"
        )
    if grad_mode._anomaly_enabled:
        check_finite(y, op, "forward output")
    return y
