"""astype: the same values in another dtype (PyTorch's `x.to(dtype)`, `x.float()`,
`x.double()`).

Forward   y = x converted to `dtype`    (float64 -> float32 rounds; bool -> float gives 0 or 1)
Backward  gx = gy converted back to x's dtype: the conversion's derivative is 1 wherever it is
          defined, and a gradient has its input's dtype. Only floating dtypes carry one: a
          cast to integers or booleans ends the gradient path (`Function.apply` records no
          node for integer outputs), as in PyTorch.
Saved     x's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["astype"]


class AsType(Function):
    @staticmethod
    def forward(ctx, x, *, dtype):
        ctx.x_dtype = x.dtype
        return x.astype(dtype)  # a copy even for the same dtype: y is new memory, as torch's

    @staticmethod
    def backward(ctx, gy):
        return gy.astype(ctx.x_dtype, copy=False)


def astype(x: Tensor, dtype: Any) -> Tensor:
    """`x` as `dtype` (a NumPy dtype or its name, e.g. "float64" or np.int64); differentiable
    between floating dtypes, no gradient through a cast to integers or booleans."""
    try:
        target = np.dtype(dtype)
    except TypeError:
        raise OpError(f"astype: {dtype!r} is not a dtype (try 'float32' or np.float64)") from None
    if target.kind not in "biuf":
        raise OpError(f"astype: tensors hold booleans, integers or floats, not {target}")
    return AsType.apply(x, dtype=target)


def _same_dtype(x: Tensor) -> Tensor:
    # To x's own dtype: the generic tests run every op in float64 (finite differences) and in
    # float32 (which must stay float32). Conversions between dtypes: tests/test_tensor.py.
    return astype(x, x.dtype)


SPECS = [OpSpec("astype", _same_dtype, unary_sample(), functions=(AsType,))]
