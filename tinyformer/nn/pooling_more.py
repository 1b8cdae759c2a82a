"""Adaptive pooling layers with PyTorch's names beside conv.py's `AdaptiveAvgPool2d`:
`nn.AdaptiveAvgPool1d`, `nn.AdaptiveMaxPool1d`, `nn.AdaptiveMaxPool2d`. Each pools to a fixed
output size whatever the input's, by calling its functional op."""

from __future__ import annotations

from collections.abc import Sequence

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]


class AdaptiveAvgPool1d(Module):
    """Average pooling of (N, C, L) or (C, L) to length `output_size`
    (`F.adaptive_avg_pool1d`)."""

    def __init__(self, output_size: int) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveMaxPool(Module):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        if return_indices:
            raise ValueError(
                f"{type(self).__name__}: return_indices=True is not supported (there is no "
                "adaptive max_unpool to take the indices)"
            )
        self.output_size, self.return_indices = output_size, return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max pooling of (N, C, L) or (C, L) to length `output_size` (`F.adaptive_max_pool1d`);
    the values only."""

    def __init__(self, output_size: int, return_indices: bool = False) -> None:
        super().__init__(output_size, return_indices)

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool1d(x, self.output_size)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max pooling of (N, C, H, W) or (C, H, W) to `output_size`, an int, a pair, or a pair
    with None to keep that input size (`F.adaptive_max_pool2d`); the values only."""

    def __init__(
        self, output_size: int | None | Sequence[int | None], return_indices: bool = False
    ) -> None:
        super().__init__(output_size, return_indices)

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(x, self.output_size)
