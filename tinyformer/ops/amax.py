"""amax and amin: the largest (smallest) element over `axis`, values only, as `torch.amax` /
`torch.amin`.

Forward   y = max_{i in axis} x_i                 (amin(x) = -amax(-x))
Backward  gx = gy * [x == y] / count(x == y): at ties the gradient is split evenly among the
          maximal elements (PyTorch's amax rule).
Saved     x and y, to find the maximal elements.

These are `max` and `min` (`tinyformer/ops/max.py`, whose `Max` Function they run) under
PyTorch's names, with PyTorch's `dim=` and `keepdim=` accepted: `max` refuses those, because
PyTorch's `x.max(dim=1)` returns (values, indices), but `torch.amax(x, dim=1)` returns values,
as these do.
"""

from __future__ import annotations

from typing import Any

from tinyformer.ops._util import normalize_axes
from tinyformer.ops.max import Max
from tinyformer.ops.neg import neg
from tinyformer.opspec import OpSpec, distinct, reduction_sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["amax", "amin"]


@torch_names
def amax(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Largest element over `axis` (an int, a tuple, or None for all); ties share the gradient
    evenly (`torch.amax`)."""
    return Max.apply(x, axis=normalize_axes(axis, x.ndim, "amax"), keepdims=keepdims)


@torch_names
def amin(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Smallest element over `axis`, as `-amax(-x)`; ties share the gradient evenly
    (`torch.amin`)."""
    normalize_axes(axis, x.ndim, "amin")  # errors name amin, not amax
    return neg(amax(neg(x), axis, keepdims))


# Distinct values: at a tie the function has a kink, where finite differences mean nothing (the
# even split at ties is compared with PyTorch in tests/test_torch_math.py).
SPECS = [
    OpSpec("amax", amax, reduction_sample(distinct), functions=(Max,)),
    OpSpec("amin", amin, reduction_sample(distinct), functions=(Max,)),
]
