"""`nn.GroupNorm`: normalisation over groups of channels, per example (`F.group_norm`,
tinyformer/ops/group_norm.py). LayerNorm and RMSNorm are in layers.py, the batch norms in
batchnorm.py."""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["GroupNorm"]


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
