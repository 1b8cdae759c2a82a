"""Padding layers with PyTorch's names: each is `F.pad` (tinyformer/ops/pad.py) with a mode and
a fixed padding. `padding` is one number for every side, or (left, right) for 1-d and
(left, right, top, bottom) for 2-d, as in PyTorch."""

from __future__ import annotations

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = [
    "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d",
    "ReplicationPad2d", "ZeroPad1d", "ZeroPad2d",
]  # fmt: skip


class _Pad(Module):
    mode = "constant"
    axes = 1  # trailing axes padded

    def __init__(self, padding: int | tuple[int, ...], value: float = 0.0) -> None:
        super().__init__()
        name, sides = type(self).__name__, 2 * self.axes
        widths = (padding,) * sides if isinstance(padding, int) else tuple(padding)
        if len(widths) != sides or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in widths
        ):
            raise ValueError(
                f"{name}: padding must be a whole number >= 0 or {sides} of them, got {padding!r}"
            )
        self.padding, self.value = widths, value

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < self.axes + 1:
            raise ValueError(
                f"{type(self).__name__}: input needs at least {self.axes + 1} axes, got shape "
                f"{x.shape}"
            )
        return F.pad(x, self.padding, mode=self.mode, value=self.value)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


class ConstantPad1d(_Pad):
    """Pad the last axis with `value`."""


class ConstantPad2d(_Pad):
    """Pad the last two axes with `value`."""

    axes = 2


class ZeroPad1d(_Pad):
    """Pad the last axis with zeros."""

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(ZeroPad1d):
    """Pad the last two axes with zeros."""

    axes = 2


class ReflectionPad1d(_Pad):
    """Mirror the last axis at its ends, without repeating the edge (each width below the
    axis' size)."""

    mode = "reflect"

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding)


class ReflectionPad2d(ReflectionPad1d):
    """Mirror the last two axes (an image's rows and columns) at their ends."""

    axes = 2


class ReplicationPad1d(ReflectionPad1d):
    """Repeat the edge elements of the last axis."""

    mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Repeat the edge pixels of the last two axes."""

    axes = 2
