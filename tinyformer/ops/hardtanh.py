"""hardtanh and relu6: a clamp under the names PyTorch's layers use (MobileNet's ReLU6).

Forward   y = min(max(x, min_val), max_val);  relu6 is hardtanh with (0, 6)
Backward  through clip: gy where min_val <= x <= max_val, else 0
Saved     clip's mask.
"""

from __future__ import annotations

from tinyformer.autograd import OpError
from tinyformer.ops.clip import clip
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["hardtanh", "relu6"]


def hardtanh(
    x: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """`x` clamped into [min_val, max_val]. `inplace` is accepted for PyTorch's signature."""
    if not min_val < max_val:
        raise OpError(f"hardtanh: min_val {min_val} must be below max_val {max_val}")
    return clip(x, min_val, max_val)


def relu6(x: Tensor, inplace: bool = False) -> Tensor:
    """`min(max(x, 0), 6)`."""
    return clip(x, 0.0, 6.0)


def _sample(draw) -> Sample:
    x = floats(draw, draw.shape(min_dims=0), -3.0, 3.0, avoid=(-1.0, 1.0, -0.5, 2.0))
    low, high = draw.choice([(-1.0, 1.0), (-0.5, 2.0)])
    return Sample([x], {"min_val": low, "max_val": high})


def _relu6_sample(draw) -> Sample:
    return Sample([floats(draw, draw.shape(min_dims=0), -3.0, 9.0, avoid=(0.0, 6.0))])


SPECS = [OpSpec("hardtanh", hardtanh, _sample), OpSpec("relu6", relu6, _relu6_sample)]
