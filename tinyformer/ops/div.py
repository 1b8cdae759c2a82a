"""div: y = x1 / x2, with NumPy broadcasting.

Forward   y = x1 / x2
Backward  gx1 = unbroadcast(gy / x2, shape(x1))
          gx2 = unbroadcast(-gy * x1 / x2^2, shape(x2)) = unbroadcast(-gy * y / x2, shape(x2))
Saved     x2 and y: the second form of gx2 reuses the output instead of squaring x2.

Dtypes    true division, as PyTorch's: integer (or boolean) operands on both sides give the
          default float dtype, float32 unless `tf.set_default_dtype` changed it (NumPy would
          give float64), so `i / 2` is float32.
          Integers beside floats take the float's dtype (`binary_operands`).

Rounding `div(x1, x2, rounding_mode="trunc")` rounds the quotient toward zero, "floor" toward
          -inf (Python's `//`, which `x1 // x2` also is), in the operands' dtype, so integers
          stay integers, as PyTorch's. A rounded quotient is a step function: its derivative is
          0 wherever it exists, and here it carries no gradient at all (PyTorch's is zeros).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.array_facts import default_dtype
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import binary_operands, data_of, unbroadcast
from tinyformer.opspec import OpSpec, binary_sample
from tinyformer.tensor import Tensor

__all__ = ["div"]


class Div(Function):
    @staticmethod
    def forward(ctx, x1, x2):
        y = x1 / x2
        ctx.shape1 = x1.shape
        ctx.save_for_backward(x2, y)
        return y

    @staticmethod
    def backward(ctx, gy):
        x2, y = ctx.saved_tensors
        gx1 = gy / x2
        gx2 = unbroadcast(-gx1 * y, x2.shape) if ctx.needs_input_grad[1] else None
        return unbroadcast(gx1, ctx.shape1), gx2


def div(x1: Any, x2: Any, *, rounding_mode: str | None = None) -> Tensor:
    """Elementwise `x1 / x2`: true division, the default float dtype for integer operands (as
    PyTorch); with `rounding_mode` "trunc" or "floor", the quotient rounded, in the operands'
    dtype."""
    a, b = binary_operands(x1, x2)
    if rounding_mode is not None:
        return _rounded(data_of(a), data_of(b), rounding_mode)
    if data_of(a).dtype.kind != "f":  # then b is not floating either
        a, b = (data_of(t).astype(default_dtype()) for t in (a, b))
    return Div.apply(a, b)


def _rounded(a: Any, b: Any, mode: str) -> Tensor:
    """`a / b` rounded toward zero ("trunc") or -inf ("floor"): data, no gradient."""
    if mode not in ("trunc", "floor"):
        raise OpError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {mode!r}")
    backend.check_same_device("div", a, b)
    xp = backend.get_array_module(a, b)
    if a.dtype.kind != "f":
        if a.dtype.kind == "b" and b.dtype.kind == "b":
            raise OpError(f"div: rounding_mode={mode!r} takes numbers, not booleans: .long() first")
        if bool((b == 0).any()):  # NumPy would give 0 with a warning
            raise ZeroDivisionError("div: integer division by zero")
        q = xp.floor_divide(a, b)
        if mode == "trunc":  # floor is one below trunc where the quotient is negative, inexact
            q = q + ((q < 0) & (q * b != a)).astype(q.dtype)
        return Tensor._make(q, None)
    with np.errstate(divide="ignore", invalid="ignore"):  # x / 0 is +-inf or nan, as PyTorch's
        q = xp.floor_divide(a, b) if mode == "floor" else xp.trunc(a / b)
    return Tensor._make(q, None)


SPECS = [OpSpec("div", div, binary_sample(positive_second=True), functions=(Div,))]
