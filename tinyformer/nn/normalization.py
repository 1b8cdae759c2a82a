"""`nn.GroupNorm`: normalisation over groups of channels, per example (`F.group_norm`,
tinyformer/ops/group_norm.py), and the instance norms, its case of one channel a group.
LayerNorm and RMSNorm are in layers.py, the batch norms in batchnorm.py."""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d"]


class GroupNorm(Module):
    """Split the C channels into `num_groups` groups and normalise each group of each example
    to mean 0 and variance 1, then scale and shift each channel (`affine`). The same in train
    and eval: nothing is averaged over the batch, so batches of one work."""

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
        dtype: Any = np.float32,
    ) -> None:  # fmt: skip
        super().__init__()
        if num_groups < 1 or num_channels % num_groups:
            raise ValueError(
                f"GroupNorm: {num_channels} channels do not split into {num_groups} groups"
            )
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.register_parameter(
            "weight", Parameter(np.ones(num_channels, dtype)) if affine else None
        )
        self.register_parameter(
            "bias", Parameter(np.zeros(num_channels, dtype)) if affine else None
        )

    def forward(self, x: Tensor) -> Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        affine = self.weight is not None
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={affine}"


class _InstanceNorm(Module):
    """Normalise each channel of each example over its positions (group norm with one channel
    a group), then scale and shift each channel if `affine` (off by default, as in PyTorch)."""

    spatial = 0  # positional axes after (N, C)

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = False,
        track_running_stats: bool = False, dtype: Any = np.float32,
    ) -> None:  # fmt: skip
        super().__init__()
        name = type(self).__name__
        if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
            raise ValueError(
                f"{name}: num_features must be a whole number >= 1, got {num_features!r}"
            )
        if track_running_stats:
            raise ValueError(
                f"{name}: track_running_stats=True is not supported; instances are normalised "
                "by their own statistics in train and eval (PyTorch's default)"
            )
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.register_parameter(
            "weight", Parameter(np.ones(num_features, dtype)) if affine else None
        )
        self.register_parameter(
            "bias", Parameter(np.zeros(num_features, dtype)) if affine else None
        )

    def forward(self, x: Tensor) -> Tensor:
        name, batched = type(self).__name__, 2 + self.spatial
        if x.ndim not in (batched - 1, batched):
            raise ValueError(
                f"{name}: input must have {batched} axes (N, C, ...) or {batched - 1} without "
                f"the batch, got shape {x.shape}"
            )
        one = x.ndim == batched - 1
        y = x.reshape(1, *x.shape) if one else x
        if y.shape[1] != self.num_features:
            raise ValueError(
                f"{name}: expected {self.num_features} channels on axis 1, got shape {y.shape}"
            )
        y = F.group_norm(y, self.num_features, self.weight, self.bias, self.eps)
        return y.reshape(*x.shape) if one else y

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, affine={self.weight is not None}"


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) or (C, L): each channel over its L positions."""

    spatial = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) or (C, H, W): each channel over its H x W pixels (style
    transfer, CycleGAN)."""

    spatial = 2
