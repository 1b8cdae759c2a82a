"""cosine_similarity: the cosine of the angle between vectors along an axis.

Forward   y = sum(x1 x2, axis) / (max(||x1||, eps) max(||x2||, eps))   (PyTorch's form: each
          norm clamped on its own), x1 and x2 broadcasting against each other
Backward  through the ops it is made of (normalize, mul, sum).
Saved     what those ops save.
"""

from __future__ import annotations

from typing import Any

from tinyformer.ops._util import binary_operands
from tinyformer.ops.norm import Norm
from tinyformer.ops.normalize import normalize
from tinyformer.opspec import Draw, OpSpec, Sample
from tinyformer.tensor import Tensor
from tinyformer.torch_names import torch_names

__all__ = ["cosine_similarity"]


@torch_names
def cosine_similarity(x1: Any, x2: Any, axis: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine similarity of `x1` and `x2` along `axis` (default 1, PyTorch's `dim=1`): 1 for
    vectors pointing the same way, -1 for opposite ones. The axis is reduced away."""
    x1, x2 = binary_operands(x1, x2)
    return (normalize(x1, 2.0, axis, eps) * normalize(x2, 2.0, axis, eps)).sum(axis)


def _sample(draw: Draw) -> Sample:
    shape = draw.shape(min_dims=1)
    # away from the zero vector, where the direction has no gradient
    a = draw.rng.uniform(0.3, 1.5, size=shape) * draw.rng.choice([-1.0, 1.0], size=shape)
    b = draw.rng.uniform(0.3, 1.5, size=shape) * draw.rng.choice([-1.0, 1.0], size=shape)
    return Sample([a, b], {"axis": draw.integers(-len(shape), len(shape) - 1)})


SPECS = [OpSpec("cosine_similarity", cosine_similarity, _sample, functions=(Norm,))]
