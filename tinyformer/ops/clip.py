"""clip: clamp x into [low, high] (either bound may be None).

Forward   y = min(max(x, low), high)
Backward  gx = gy where low <= x <= high, else 0 (the bounds count as inside, as in torch.clamp)
Saved     the boolean mask of inside elements (one byte each, smaller than x).
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["clamp", "clip"]


class Clip(Function):
    @staticmethod
    def forward(ctx, x, *, low, high):
        xp = backend.get_array_module(x)
        inside = xp.ones(x.shape, dtype=bool)
        if low is not None:
            inside &= x >= low
        if high is not None:
            inside &= x <= high
        ctx.save_for_backward(inside)
        return xp.clip(x, low, high).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, gy):
        (inside,) = ctx.saved_tensors
        return gy * inside


def clip(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:  # noqa: A002
    """Clamp every element into `[min, max]`; `torch.clamp` under its NumPy name."""
    if min is None and max is None:
        raise OpError("clip: give at least one of min and max")
    if min is not None and max is not None and min > max:
        raise OpError(f"clip: min {min} is greater than max {max}")
    return Clip.apply(x, low=min, high=max)


clamp = clip  # PyTorch's name


def _sample(draw) -> Sample:
    low, high = draw.choice([(-1.0, 1.0), (None, 0.5), (-0.5, None)])
    avoid = [b for b in (low, high) if b is not None]
    return Sample([floats(draw, draw.shape(min_dims=0), avoid=avoid)], {"min": low, "max": high})


SPECS = [OpSpec("clip", clip, _sample, functions=(Clip,))]
