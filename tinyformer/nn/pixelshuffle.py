"""`nn.PixelShuffle` and `nn.PixelUnshuffle`: channels into space and back (sub-pixel
convolution for super-resolution), calling `F.pixel_shuffle` and `F.pixel_unshuffle`."""

from __future__ import annotations

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """(*, C r^2, H, W) -> (*, C, H r, W r), r = `upscale_factor`."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H r, W r) -> (*, C r^2, H, W), r = `downscale_factor`: PixelShuffle's inverse."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
