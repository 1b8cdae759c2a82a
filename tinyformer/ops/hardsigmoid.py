"""hardsigmoid: a piecewise-linear sigmoid (MobileNetV3's gates), cheap to compute.

Forward   y = 0 for x <= -3, 1 for x >= 3, (x + 3) / 6 between.
Backward  gx = gy / 6 strictly inside (-3, 3), else 0, as PyTorch's (at x = +-3 exactly,
          PyTorch gives 0; a clamp would give 1/6). PyTorch multiplies by 1.0f / 6.0f, a
          float32 constant even in float64, so its gradient is 3e-8 (relative) off this one.
Saved     where's condition (the mask of the linear part).
"""

from __future__ import annotations

from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, unary_sample
from tinyformer.tensor import Tensor

__all__ = ["hardsigmoid"]


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    """`relu6(input + 3) / 6`. `inplace` is accepted for PyTorch's signature; the result is a
    new tensor."""
    x = input.data
    saturated = (x >= 3).astype(x.dtype)  # the constant outside: 1 above, 0 below
    return where((x > -3) & (x < 3), (input + 3.0) / 6.0, saturated)


SPECS = [OpSpec("hardsigmoid", hardsigmoid, unary_sample(-5.0, 5.0, avoid=(-3.0, 3.0)))]
