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
from tinyformer.ops.reshape import flatten
from tinyformer.tensor import Tensor

__all__ = [
    "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "Conv1d", "Conv2d", "ConvTranspose2d", "Flatten",
    "MaxPool1d", "MaxPool2d", "MaxUnpool2d", "Unflatten", "Unfold", "Upsample",
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


class MaxPool1d(Module):
    """`F.max_pool1d` over (N, C, L) sequences."""

    def __init__(
        self, kernel_size: int, stride: int | None = None, padding: int = 0, dilation: int = 1
    ) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation = dilation

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation)


class AvgPool1d(Module):
    """`F.avg_pool1d` over (N, C, L) sequences."""

    def __init__(
        self, kernel_size: int, stride: int | None = None, padding: int = 0, *,
        count_include_pad: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool1d(
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
    """Axes start_dim..end_dim merged into one, as PyTorch's: by default (N, d1, d2, ...) ->
    (N, d1 * d2 * ...); `Flatten(0, 1)` merges the first two."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        for name, value in (("start_dim", start_dim), ("end_dim", end_dim)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Flatten: {name} must be an int, got {value!r}")
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x: Tensor) -> Tensor:
        return flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Axis `dim` split into `unflattened_size`, as PyTorch's: `Unflatten(1, (2, 5))` takes
    (N, 10, ...) to (N, 2, 5, ...); one size may be -1 (inferred)."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        sizes = tuple(unflattened_size)
        if not sizes or any(
            isinstance(n, bool) or not isinstance(n, (int, np.integer)) for n in sizes
        ):
            raise TypeError(f"Unflatten: unflattened_size must be ints, got {unflattened_size!r}")
        if sum(n == -1 for n in sizes) > 1 or any(n < -1 for n in sizes):
            raise ValueError(
                f"Unflatten: unflattened_size {sizes} may hold one -1 and no other negative"
            )
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in sizes)

    def forward(self, x: Tensor) -> Tensor:
        ndim, sizes = len(x.shape), self.unflattened_size
        if not -ndim <= self.dim < ndim:
            raise ValueError(f"Unflatten: dim {self.dim} is out of range for shape {x.shape}")
        axis = self.dim % ndim
        side, known = x.shape[axis], math.prod(n for n in sizes if n != -1)
        fits = side % known == 0 if -1 in sizes and known else side == math.prod(sizes)
        if not fits:
            raise ValueError(
                f"Unflatten: axis {self.dim} of shape {x.shape} has {side} elements, which do not "
                f"split into {sizes}"
            )
        return reshape(x, *x.shape[:axis], *sizes, *x.shape[axis + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
