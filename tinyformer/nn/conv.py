"""Convolution layers (`torch.nn` names): Conv1d for sequences; Conv2d, ConvTranspose2d,
pooling and unpooling, Flatten for images. Each forward is one functional op from
`tinyformer/ops/`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn import init
from tinyformer.nn.module import Module, Parameter
from tinyformer.ops import reshape
from tinyformer.ops._im2col import pair
from tinyformer.tensor import Tensor

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool2d", "Conv1d", "Conv2d", "ConvTranspose2d", "Flatten",
    "MaxPool2d", "MaxUnpool2d", "Unfold", "Upsample",
]  # fmt: skip

IntPair = int | Sequence[int]


def _init_parameters(
    module: Module, shape: tuple[int, ...], fan_in: int, out_channels: int, bias: bool, dtype: Any
) -> None:
    """weight of `shape` and bias (out_channels,) or None, both U(±1/sqrt(fan_in)) (PyTorch's
    default for convolutions)."""
    module.weight = init.fan_in_uniform_(Parameter(np.zeros(shape, dtype)), fan_in)
    module.register_parameter("bias", Parameter(np.zeros(out_channels, dtype)) if bias else None)
    if module.bias is not None:
        init.fan_in_uniform_(module.bias, fan_in)


class Conv1d(Module):
    """1-D convolution over sequences (N, C, L); weight (out, in/groups, k). PyTorch's init:
    U(±1/sqrt(fan_in)) for weight and bias, fan_in = in/groups * k."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv1d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        if kernel_size < 1:
            raise ValueError(f"Conv1d: kernel_size must be >= 1, got {kernel_size}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        shape = (out_channels, in_channels // groups, kernel_size)
        _init_parameters(
            self, shape, in_channels // groups * kernel_size, out_channels, bias, dtype
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.conv1d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}"
        )


class Conv2d(Module):
    """2-D convolution; weight (out, in/groups, kh, kw). PyTorch's init: U(±1/sqrt(fan_in))
    for weight and bias, fan_in = in/groups * kh * kw."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        kh, kw = pair("Conv2d", "kernel_size", kernel_size, 1)
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"Conv2d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        shape = (out_channels, in_channels // groups, kh, kw)
        _init_parameters(self, shape, in_channels // groups * kh * kw, out_channels, bias, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}"
        )


class ConvTranspose2d(Module):
    """Transposed convolution; weight (in, out/groups, kh, kw), as in PyTorch (whose init uses
    fan_in = out/groups * kh * kw, the fan-in of the conv2d this one is the transpose of)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        output_padding: IntPair = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntPair = 1,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        kh, kw = pair("ConvTranspose2d", "kernel_size", kernel_size, 1)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (kh, kw)
        self.stride, self.padding, self.output_padding = stride, padding, output_padding
        self.groups, self.dilation = groups, dilation
        shape = (in_channels, out_channels // groups, kh, kw)
        _init_parameters(self, shape, out_channels // groups * kh * kw, out_channels, bias, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(
            x, self.weight, self.bias, self.stride, self.padding, self.output_padding,
            self.groups, self.dilation,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )


class MaxPool2d(Module):
    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        return_indices: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices = dilation, return_indices

    def forward(self, x: Tensor) -> Any:
        return F.max_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class MaxUnpool2d(Module):
    def __init__(
        self, kernel_size: IntPair, stride: IntPair | None = None, padding: IntPair = 0
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: Tensor, indices: Any, output_size: Sequence[int] | None = None) -> Tensor:
        return F.max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding, output_size)


class AvgPool2d(Module):
    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        *,  # keywords only: PyTorch's fourth argument is ceil_mode, which this one does not take
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(
            x, self.kernel_size, self.stride, self.padding, count_include_pad=self.count_include_pad
        )


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed output size, whatever the input's (`F.adaptive_avg_pool2d`);
    `output_size` an int, a pair, or a pair with None to keep that input size."""

    def __init__(self, output_size: int | None | Sequence[int | None]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Unfold(Module):
    """Sliding windows as columns, (N, C, H, W) -> (N, C kh kw, L) (`F.unfold`)."""

    def __init__(
        self,
        kernel_size: IntPair,
        dilation: IntPair = 1,
        padding: IntPair = 0,
        stride: IntPair = 1,
    ) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, x: Tensor) -> Tensor:
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
            f"padding={self.padding}, stride={self.stride}"
        )


class Upsample(Module):
    """Resize images by nearest-neighbour or bilinear interpolation (`F.interpolate`)."""

    def __init__(
        self,
        size: IntPair | None = None,
        scale_factor: float | Sequence[float] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
    ) -> None:
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners = align_corners

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self) -> str:
        return f"scale_factor={self.scale_factor}, mode={self.mode!r}"


class Flatten(Module):
    """(N, d1, d2, ...) -> (N, d1 * d2 * ...)."""

    def forward(self, x: Tensor) -> Tensor:
        return reshape(x, x.shape[0], math.prod(x.shape[1:]))
