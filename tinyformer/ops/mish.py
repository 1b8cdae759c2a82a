"""mish: a smooth, non-monotonic rectifier (Misra, 2019; YOLOv4's backbone).

Forward   y = x tanh(softplus(x))
Backward  through the ops it is made of (softplus, tanh, mul): y' = tanh(s) + x sigmoid(x)
          (1 - tanh(s)^2) with s = softplus(x).
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.ops.softplus import softplus
from tinyformer.ops.tanh import tanh
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["mish"]


def mish(x: Tensor, inplace: bool = False) -> Tensor:
    """`x * tanh(softplus(x))`. `inplace` is accepted for PyTorch's signature; the result is a
    new tensor."""
    return x * tanh(softplus(x))


def _sample(draw) -> Sample:
    return Sample([floats(draw, draw.shape(min_dims=0), -5.0, 5.0)])


SPECS = [OpSpec("mish", mish, _sample)]
