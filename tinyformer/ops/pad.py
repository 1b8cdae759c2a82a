"""pad: constant padding with PyTorch's `F.pad` convention.

`pad` lists (before, after) pairs starting from the LAST axis: (left, right) pads the last axis,
(left, right, top, bottom) the last two, and so on.

Forward   y = x placed inside a tensor of `value`, `before` elements in along each padded axis
Backward  gx = the window of gy where x sits (padding elements are constants: no gradient)
Saved     the window (one slice per axis).
"""

from __future__ import annotations

from collections.abc import Sequence

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["pad"]


class Pad(Function):
    @staticmethod
    def forward(ctx, x, *, widths, value):
        xp = backend.get_array_module(x)
        ctx.window = tuple(slice(before, before + n) for (before, _), n in zip(widths, x.shape))
        return xp.pad(x, widths, mode="constant", constant_values=value)

    @staticmethod
    def backward(ctx, gy):
        return gy[ctx.window]


def pad(x: Tensor, pad: Sequence[int], mode: str = "constant", value: float = 0.0) -> Tensor:
    """Pad with `value`; `pad` = (before, after) pairs from the last axis backwards."""
    if mode != "constant":
        raise OpError(f"pad: only mode='constant' is implemented, got {mode!r}")
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise OpError(
            f"pad: {tuple(pad)} must hold (before, after) pairs for at most {x.ndim} axes"
        )
    if any(p < 0 for p in pad):
        raise OpError(f"pad: negative padding {tuple(pad)} is not supported")
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)]
    widths = [(0, 0)] * (x.ndim - len(pairs)) + pairs[::-1]
    return Pad.apply(x, widths=tuple(widths), value=value)


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    widths = [draw.integers(0, 2) for _ in range(2 * draw.integers(1, len(shape)))]
    return Sample([floats(draw, shape)], {"pad": tuple(widths), "value": draw.choice([0.0, -1.0])})


SPECS = [OpSpec("pad", pad, _sample, functions=(Pad,))]
