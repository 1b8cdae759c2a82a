"""pad: padding with PyTorch's `F.pad` convention and modes.

`pad` lists (before, after) pairs starting from the LAST axis: (left, right) pads the last axis,
(left, right, top, bottom) the last two, and so on.

mode="constant":
Forward   y = x placed inside a tensor of `value`, `before` elements in along each padded axis
Backward  gx = the window of gy where x sits (padding elements are constants: no gradient)
Saved     the window (one slice per axis).

mode="reflect", "replicate" or "circular" (CycleGAN's and style transfer's reflection padding):
Forward   along each padded axis, y[j] = x[src[j]], src the source of each position: the
          mirror image without the edge (reflect: 2 1 | 0 1 2 | 1 0), the edge repeated
          (replicate: 0 0 | 0 1 2 | 2 2) or the other end (circular: 1 2 | 0 1 2 | 0 1)
Backward  a gather's gradient is a scatter-add: gx[i] = sum of gy[j] over the j with src[j] = i,
          one axis at a time, last padded axis first
Saved     the source indices of each padded axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["pad"]


class PadIndexed(Function):
    @staticmethod
    def forward(ctx, x, *, sources):
        xp = backend.get_array_module(x)
        ctx.sources = [(axis, xp.asarray(src), x.shape[axis]) for axis, src in sources]
        for axis, src, _ in ctx.sources:
            x = xp.take(x, src, axis=axis)
        return x

    @staticmethod
    def backward(ctx, gy):
        xp = backend.get_array_module(gy)
        for axis, src, n in reversed(ctx.sources):
            moved = xp.moveaxis(gy, axis, 0)
            g = xp.zeros((n, *moved.shape[1:]), gy.dtype)
            xp.add.at(g, src, moved)  # positions that copy one element add up in it
            gy = xp.moveaxis(g, 0, axis)
        return gy


# The source index of each position of an axis of n elements padded by (before, after)
_SOURCES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


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
    """Pad with `value` (mode="constant"), or by reflecting, replicating or wrapping x's own
    elements; `pad` = (before, after) pairs from the last axis backwards."""
    if mode != "constant" and mode not in _SOURCES:
        raise OpError(
            f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}"
        )
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise OpError(
            f"pad: {tuple(pad)} must hold (before, after) pairs for at most {x.ndim} axes"
        )
    if any(p < 0 for p in pad):
        raise OpError(f"pad: negative padding {tuple(pad)} is not supported")
    pairs = [(pad[i], pad[i + 1]) for i in range(0, len(pad), 2)]
    widths = [(0, 0)] * (x.ndim - len(pairs)) + pairs[::-1]
    if mode == "constant":
        return Pad.apply(x, widths=tuple(widths), value=value)
    sources = []
    for axis, (before, after) in enumerate(widths):
        if not before and not after:
            continue
        n = x.shape[axis]
        # reflect mirrors without the edge: it needs more than `before` elements to mirror
        limit = n - 1 if mode == "reflect" else (n if mode == "circular" else None)
        if n == 0:
            raise OpError(
                f"pad: mode={mode!r} has no elements to copy on axis {axis} of size 0 "
                f"(input shape {x.shape})"
            )
        if limit is not None and max(before, after) > limit:
            raise OpError(
                f"pad: mode={mode!r} pads axis {axis} of size {n} by at most {limit}, got "
                f"({before}, {after}) (input shape {x.shape})"
            )
        src = np.pad(np.arange(n), (before, after), mode=_SOURCES[mode])
        sources.append((axis, src))
    return PadIndexed.apply(x, sources=tuple(sources))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    widths = [draw.integers(0, 2) for _ in range(2 * draw.integers(1, len(shape)))]
    return Sample([floats(draw, shape)], {"pad": tuple(widths), "value": draw.choice([0.0, -1.0])})


def _sample_indexed(draw) -> Sample:
    mode = draw.choice(["reflect", "replicate", "circular"])
    shape = draw.shape(min_dims=1, min_side=3)  # room for reflect's widths of up to 2
    widths = [draw.integers(0, 2) for _ in range(2 * draw.integers(1, len(shape)))]
    return Sample([floats(draw, shape)], {"pad": tuple(widths), "mode": mode})


SPECS = [
    OpSpec("pad", pad, _sample, functions=(Pad,)),
    OpSpec("pad_indexed", pad, _sample_indexed, functions=(PadIndexed,)),
]
