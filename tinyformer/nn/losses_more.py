"""More loss modules with PyTorch's names: the ranking and embedding losses
(`nn.MarginRankingLoss`, `nn.TripletMarginLoss`, `nn.CosineEmbeddingLoss`), the soft margin
losses (`nn.SoftMarginLoss`, `nn.MultiLabelSoftMarginLoss`) and the likelihood losses
(`nn.GaussianNLLLoss`, `nn.PoissonNLLLoss`). Each holds its options and calls its functional op
(tinyformer/ops/margin_losses.py, likelihood_losses.py); the common losses are in losses.py."""

from __future__ import annotations

from typing import Any

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = [
    "CosineEmbeddingLoss", "GaussianNLLLoss", "MarginRankingLoss", "MultiLabelSoftMarginLoss",
    "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
]  # fmt: skip


class _Loss(Module):
    """A loss with `reduction`; PyTorch's deprecated `size_average` and `reduce` are taken where
    PyTorch's signature has them, so that positional arguments land where they do there, and
    refused unless None."""

    def __init__(
        self, size_average: None = None, reduce: None = None, reduction: str = "mean"
    ) -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            raise ValueError(
                f"{type(self).__name__}: size_average and reduce are deprecated: use reduction="
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"{type(self).__name__}: reduction must be mean, sum or none, got {reduction!r}"
            )
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MarginRankingLoss(_Loss):
    """`F.margin_ranking_loss(x1, x2, y, margin)`: max(0, -y (x1 - x2) + margin), y = 1 where x1
    should rank higher, -1 where x2 should."""

    def __init__(
        self,
        margin: float = 0.0,
        size_average: None = None,
        reduce: None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """`F.triplet_margin_loss(anchor, positive, negative, ...)`: max(0, margin + d(a, p) -
    d(a, n)), d the p-norm distance; `swap` uses the closer of d(a, n) and d(p, n)."""

    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average: None = None,
        reduce: None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        if not margin > 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin!r}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(
            anchor,
            positive,
            negative,
            self.margin,
            self.p,
            self.eps,
            self.swap,
            reduction=self.reduction,
        )

    def extra_repr(self) -> str:
        return f"margin={self.margin}, p={self.p}, swap={self.swap}, reduction={self.reduction!r}"


class CosineEmbeddingLoss(_Loss):
    """`F.cosine_embedding_loss(x1, x2, y, margin)`: 1 - cos(x1, x2) for y = 1, max(0,
    cos(x1, x2) - margin) for y = -1."""

    def __init__(
        self,
        margin: float = 0.0,
        size_average: None = None,
        reduce: None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return F.cosine_embedding_loss(
            input1, input2, target, self.margin, reduction=self.reduction
        )


class SoftMarginLoss(_Loss):
    """`F.soft_margin_loss(input, target)`: log(1 + exp(-y x)), labels y of +1 and -1."""

    def __init__(
        self, size_average: None = None, reduce: None = None, reduction: str = "mean"
    ) -> None:
        super().__init__(size_average, reduce, reduction)

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """`F.multilabel_soft_margin_loss(input, target, weight)`: one binary cross-entropy from
    logits per class, averaged over the classes; `weight` (C,) is a buffer, as in PyTorch."""

    def __init__(
        self,
        weight: Any = None,
        size_average: None = None,
        reduce: None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)  # saved in the state dict, as in PyTorch

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return F.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """`F.gaussian_nll_loss(input, target, var, ...)`: the negative log-likelihood of the
    targets under Gaussians of means `input` and variances `var` (clamped to >= eps)."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Any, var: Any) -> Tensor:  # noqa: A002
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class PoissonNLLLoss(_Loss):
    """`F.poisson_nll_loss(input, target, ...)`: the negative log-likelihood of counts under
    Poisson rates exp(input) (`log_input=True`) or input; `full` adds Stirling's term."""

    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average: None = None,
        eps: float = 1e-8,
        reduce: None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Any) -> Tensor:
        return F.poisson_nll_loss(
            log_input, target, self.log_input, self.full, eps=self.eps, reduction=self.reduction
        )
