"""Batch normalisation layers (`torch.nn` names): BatchNorm1d for (N, C) and (N, C, L), and
BatchNorm2d for (N, C, H, W). Each forward is one call of `F.batch_norm`.

State, named as PyTorch's so that its state dicts load: `weight` (ones) and `bias` (zeros) when
`affine`; the buffers `running_mean` (zeros), `running_var` (ones) and `num_batches_tracked`
(an int64 count) when `track_running_stats`.

In training the batch's statistics normalise and the running ones move toward them by
`momentum` (or, with `momentum=None`, become the plain average over every batch so far:
the factor is 1 / num_batches_tracked). In eval the running statistics normalise, so one
sample's output no longer depends on the rest of its batch. Without running statistics the
batch's are used in both modes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module, Parameter
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = ["BatchNorm1d", "BatchNorm2d"]


class _BatchNorm(Module):
    dims: tuple[int, ...] = ()  # the input ranks the layer accepts

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        if isinstance(num_features, bool) or not isinstance(num_features, (int, np.integer)):
            raise TypeError(
                f"{type(self).__name__}: num_features must be an int, got {num_features!r}"
            )
        if num_features < 1:
            raise ValueError(
                f"{type(self).__name__}: num_features must be >= 1, got {num_features}"
            )
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        c = self.num_features
        self.register_parameter("weight", Parameter(np.ones(c, dtype)) if affine else None)
        self.register_parameter("bias", Parameter(np.zeros(c, dtype)) if affine else None)
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(c, dtype))
            self.register_buffer("running_var", np.ones(c, dtype))
            self.register_buffer("num_batches_tracked", np.zeros((), np.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            array_of(self.running_mean)[...] = 0
            array_of(self.running_var)[...] = 1
            array_of(self.num_batches_tracked)[...] = 0

    def _check_input(self, x: Tensor) -> None:
        if x.ndim not in self.dims:
            ranks = " or ".join(f"{d}D" for d in self.dims)
            raise ValueError(f"{type(self).__name__}: expected {ranks} input (got {x.ndim}D input)")
        if x.shape[1] != self.num_features:
            raise ValueError(
                f"{type(self).__name__}: input of shape {x.shape} has {x.shape[1]} channels, "
                f"expected num_features={self.num_features}"
            )

    def forward(self, x: Tensor) -> Tensor:
        self._check_input(x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            count = array_of(self.num_batches_tracked)
            count[...] = count + 1  # in place: the buffer stays the same array
            if self.momentum is None:  # the cumulative average of every batch's statistics
                factor = 1.0 / float(count)
        # the batch's statistics in training, and also in eval when none are kept
        use_batch = self.training or self.running_mean is None
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, use_batch, factor,
            self.eps,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L): statistics per channel C."""

    dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W): statistics per channel C, over N, H and W."""

    dims = (4,)
