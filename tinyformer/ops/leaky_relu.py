"""leaky_relu: a rectifier that lets a small slope through below zero (GANs' discriminators).

Forward   y = x where x > 0, else a x     (a: negative_slope, 0.01 by default)
Backward  gx = gy where x > 0, else a gy  (at exactly 0 the slope a, as in PyTorch)
Saved     the boolean mask x > 0.
"""

from __future__ import annotations

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["leaky_relu"]


class LeakyReLU(Function):
    @staticmethod
    def forward(ctx, x, *, negative_slope):
        xp = backend.get_array_module(x)
        positive = x > 0
        ctx.save_for_backward(positive)
        ctx.slope = x.dtype.type(negative_slope)
        return xp.where(positive, x, x * ctx.slope)

    @staticmethod
    def backward(ctx, gy):
        (positive,) = ctx.saved_tensors
        xp = backend.get_array_module(gy)
        return xp.where(positive, gy, gy * ctx.slope)


def leaky_relu(x: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """Elementwise `x` where positive, else `negative_slope * x`. `inplace` is accepted for
    PyTorch's signature; the result is a new tensor."""
    if isinstance(negative_slope, bool) or not isinstance(negative_slope, (int, float)):
        raise OpError(f"leaky_relu: negative_slope must be a number, got {negative_slope!r}")
    return LeakyReLU.apply(x, negative_slope=float(negative_slope))


def _sample(draw) -> Sample:
    slope = draw.choice([0.01, 0.2, 0.0, 1.5])
    x = floats(draw, draw.shape(min_dims=0), avoid=(0.0,))
    return Sample([x], {"negative_slope": slope})


SPECS = [OpSpec("leaky_relu", leaky_relu, _sample, functions=(LeakyReLU,))]
