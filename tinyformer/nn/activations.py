"""Smooth rectifiers under PyTorch's names (`nn.ELU`, `nn.Softplus`); each calls its functional
op (`tinyformer/ops/softplus.py`). The common ones (`ReLU`, `LeakyReLU`, `GELU`, ...) are in
layers.py."""

from __future__ import annotations

import tinyformer.nn.functional as F
from tinyformer.nn.module import Module
from tinyformer.tensor import Tensor

__all__ = ["ELU", "Softplus"]


class ELU(Module):
    """x where positive, else alpha (exp(x) - 1) (`F.elu`)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace  # accepted for PyTorch's signature: the result is a new tensor

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    """log(1 + exp(beta x)) / beta, linear above threshold (`F.softplus`)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"
