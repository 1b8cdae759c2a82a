"""adaptive_avg_pool1d and adaptive_max_pool1d: pooling a sequence to a fixed length, as in
PyTorch.

Shapes    x (N, C, L) or (C, L) -> y (N, C, Lo) or (C, Lo)
Windows   output position i pools input positions [floor(i L / Lo), ceil((i + 1) L / Lo)).
Forward   avg: through adaptive_avg_pool2d, the sequence viewed as an image of height 1
          ((N, C, 1, L), output (1, Lo)), as avg_pool1d goes through avg_pool2d.
          max: adaptive_max_pool2d's one-axis step: gather the windows, amax over each.
Backward  through those ops.
Saved     what those ops save.
"""

from __future__ import annotations

from tinyformer.ops.adaptive_avg_pool2d import adaptive_avg_pool2d
from tinyformer.ops.adaptive_max_pool2d import check_input, output_sizes, window_max
from tinyformer.opspec import Draw, OpSpec, Sample, distinct, floats
from tinyformer.tensor import Tensor

__all__ = ["adaptive_avg_pool1d", "adaptive_max_pool1d"]


def adaptive_avg_pool1d(input: Tensor, output_size: int) -> Tensor:  # noqa: A002
    """Adaptive average pooling along the last axis, as `F.adaptive_avg_pool1d`."""
    op = "adaptive_avg_pool1d"
    check_input(op, input, 1, False)
    (lo,) = output_sizes(op, input, output_size, 1)
    return adaptive_avg_pool2d(input.unsqueeze(-2), (1, lo)).squeeze(-2)


def adaptive_max_pool1d(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    output_size: int,
    return_indices: bool = False,
) -> Tensor:
    """Adaptive max pooling along the last axis, as `F.adaptive_max_pool1d` (values only)."""
    op = "adaptive_max_pool1d"
    check_input(op, input, 1, return_indices)
    (lo,) = output_sizes(op, input, output_size, 1)
    return window_max(input, -1, lo)


def _sample(draw: Draw, maximum: bool) -> Sample:
    shape = (draw.integers(1, 2), draw.integers(1, 3), draw.integers(1, 8))
    if draw.integers(0, 3) == 0:
        shape = shape[1:]
    out = draw.choice([draw.integers(1, 5), (draw.integers(1, 5),)])
    x = distinct(draw, shape) if maximum else floats(draw, shape)  # max: no ties
    return Sample([x], {"output_size": out})


SPECS = [
    OpSpec("adaptive_avg_pool1d", adaptive_avg_pool1d, lambda draw: _sample(draw, False)),
    OpSpec("adaptive_max_pool1d", adaptive_max_pool1d, lambda draw: _sample(draw, True)),
]
