"""Distance modules with PyTorch's names: `nn.PairwiseDistance` and `nn.CosineSimilarity`,
each calling its functional op (`F.pairwise_distance`, `F.cosine_similarity`)."""

from __future__ import annotations

from typing import Any

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p over the last axis (`F.pairwise_distance`)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim  # `norm`: PyTorch's attribute

    def forward(self, x1: Any, x2: Any) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    def extra_repr(self) -> str:
        return f"p={self.norm}, eps={self.eps}, keepdim={self.keepdim}"


class CosineSimilarity(Module):
    """The cosine of the angle between x1 and x2 along `dim` (`F.cosine_similarity`)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Any, x2: Any) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, eps={self.eps}"
