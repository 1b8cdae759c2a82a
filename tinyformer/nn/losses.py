"""Loss modules with PyTorch's names (`criterion = nn.CrossEntropyLoss()`): each holds its
options and calls its functional op."""

from __future__ import annotations

from typing import Any

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss",
    "MSELoss", "NLLLoss", "SmoothL1Loss",
]  # fmt: skip


class BCELoss(Module):
    """`F.binary_cross_entropy(input, target, ...)`: probabilities (a sigmoid's output) against
    targets of the same shape; `weight` is data. From logits, `BCEWithLogitsLoss` is stabler."""

    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__()
        self.weight, self.reduction = weight, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class BCEWithLogitsLoss(Module):
    """`F.binary_cross_entropy_with_logits(input, target, ...)`: logits against probabilities
    (0/1 labels or soft ones) of the same shape; `weight` and `pos_weight` are data."""

    def __init__(self, weight: Any = None, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__()
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight
        )

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class CrossEntropyLoss(Module):
    """`F.cross_entropy(input, target, ...)`: logits (N, C, ...) against class indices (N, ...)."""

    def __init__(
        self,
        weight: Any = None,
        *,  # keywords only: PyTorch's next ones are size_average and reduce, long deprecated
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)  # class weights (C,): saved, as in PyTorch
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.cross_entropy(
            input,
            target,
            self.weight,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}, " + (
            f"label_smoothing={self.label_smoothing}"
        )


class KLDivLoss(Module):
    """`F.kl_div(input, target, ...)`: KL(target || exp(input)), input log-probabilities,
    target probabilities (or log-probabilities with `log_target=True`) of the same shape.
    `reduction="batchmean"` is the mathematical KL divergence per sample; "mean" (PyTorch's
    default, kept for its sake) also divides by the number of classes."""

    def __init__(
        self,
        size_average: None = None,
        reduce: None = None,
        reduction: str = "mean",
        log_target: bool = False,
    ) -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            raise ValueError("KLDivLoss: size_average and reduce are deprecated: use reduction=")
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, log_target={self.log_target}"


class MSELoss(Module):
    """`F.mse_loss(input, target, reduction)`: the mean squared error of equal shapes."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.mse_loss(input, target, self.reduction)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class NLLLoss(Module):
    """`F.nll_loss(input, target, ...)`: log-probabilities (N, C, ...) against class indices
    (N, ...); after `nn.LogSoftmax(dim=1)` it is `CrossEntropyLoss`."""

    def __init__(
        self, weight: Any = None, *, ignore_index: int = -100, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.register_buffer("weight", weight)  # class weights (C,): saved, as in PyTorch
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.nll_loss(
            input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction
        )

    def extra_repr(self) -> str:
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"


class L1Loss(Module):
    """`F.l1_loss(input, target)`: mean absolute error, shapes equal."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(Module):
    """`F.smooth_l1_loss(input, target, beta=beta)`: squared error below beta, absolute above."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__()
        self.reduction, self.beta = reduction, beta

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(Module):
    """`F.huber_loss(input, target, delta=delta)`: squared error up to delta, then linear."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__()
        self.reduction, self.delta = reduction, delta

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.huber_loss(input, target, self.reduction, self.delta)
