"""`nn.Bilinear`: y = x1^T A x2 + b, one matrix A per output feature (`F.bilinear`)."""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn import init
from tinyformer.nn.layers import _check_sizes
from tinyformer.nn.module import Module, Parameter
from tinyformer.tensor import Tensor

__all__ = ["Bilinear"]


class Bilinear(Module):
    """y[..., o] = x1 weight[o] x2 + bias[o], with weight (out, in1, in2) and bias (out,) as in
    PyTorch, both initialised as PyTorch does: uniform in (-1/sqrt(in1), 1/sqrt(in1)).

    Shapes:
        x1 (*, in1_features), x2 (*, in2_features) -> y (*, out_features)
    """

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        _check_sizes(
            "Bilinear",
            in1_features=in1_features,
            in2_features=in2_features,
            out_features=out_features,
        )
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        shape = (out_features, in1_features, in2_features)
        self.weight = init.fan_in_uniform_(Parameter(np.zeros(shape, dtype)), in1_features)
        self.register_parameter("bias", Parameter(np.zeros(out_features, dtype)) if bias else None)
        if self.bias is not None:
            init.fan_in_uniform_(self.bias, in1_features)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
