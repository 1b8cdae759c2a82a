"""hardswish: x * relu6(x + 3) / 6, the piecewise-quadratic swish of MobileNetV3.

Forward   y = 0                    for x <= -3
          y = x (x + 3) / 6        for -3 < x < 3
          y = x                    for x >= 3
Backward  gx = gy * 0              for x <= -3
          gx = gy * (2 x + 3) / 6  for -3 < x < 3
          gx = gy                  for x >= 3     (at the kinks, the flat pieces' slopes: PyTorch's)
Saved     x: the slope is a cheap function of it.
"""

from __future__ import annotations

from tinyformer import backend, registry
from tinyformer.autograd import Function
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["hardswish"]


@registry.reference("hardswish.forward")
def hardswish_forward(x):
    xp = backend.get_array_module(x)
    return (x * xp.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(x.dtype, copy=False)


@registry.reference("hardswish.backward")
def hardswish_backward(gy, x):
    xp = backend.get_array_module(x)
    slope = xp.where(x <= -3.0, 0.0, xp.where(x < 3.0, (2.0 * x + 3.0) / 6.0, 1.0))
    return (gy * slope).astype(gy.dtype, copy=False)


class Hardswish(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return registry.call("hardswish.forward", x)

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return registry.call("hardswish.backward", gy, x)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Hard swish, as `torch.nn.functional.hardswish` (`inplace` is accepted and ignored: the
    result is always a new tensor)."""
    return Hardswish.apply(input)


def _sample(draw) -> Sample:
    # both flat pieces and the quadratic, away from the kinks at -3 and 3
    x = floats(draw, draw.shape(min_dims=0), -5.0, 5.0, avoid=(-3.0, 3.0))
    return Sample([x], {})


SPECS = [
    OpSpec(
        "hardswish", hardswish, _sample, functions=(Hardswish,),
        primitives=("hardswish.forward", "hardswish.backward"),
    )
]  # fmt: skip
