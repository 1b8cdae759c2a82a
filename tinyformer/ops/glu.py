"""glu: the gated linear unit (Dauphin et al., 2017): one half of the input gates the other.

Shapes    x (..., 2 n, ...) -> y (..., n, ...), halved along `axis`
Forward   a, b = the first and second halves of x along axis;  y = a sigmoid(b)
Backward  through the ops it is made of (chunk, sigmoid, mul): ga = gy sigmoid(b),
          gb = gy a sigmoid(b) (1 - sigmoid(b)), written side by side into gx.
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.sigmoid import sigmoid
from tinyformer.ops.softmax import check_axis
from tinyformer.ops.split import chunk
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["glu"]


@torch_names
def glu(input: Tensor, axis: int = -1) -> Tensor:  # noqa: A002 (named as in PyTorch)
    """`a * sigmoid(b)`, a and b the halves of `input` along `axis` (PyTorch's `dim`)."""
    if input.ndim == 0:
        raise OpError("glu: a 0-d input has no axis to halve")
    axis = check_axis("glu", axis, input.ndim)
    if input.shape[axis] % 2:
        raise OpError(
            f"glu: axis {axis} must have an even length to halve, got shape {input.shape}"
        )
    a, b = chunk(input, 2, axis)
    return a * sigmoid(b)


def _sample(draw) -> Sample:
    shape = list(draw.shape(min_dims=1))
    axis = draw.integers(-len(shape), len(shape) - 1)
    shape[axis] *= 2
    return Sample([floats(draw, tuple(shape), -3.0, 3.0)], {"axis": axis})


SPECS = [OpSpec("glu", glu, _sample)]
