"""In-place parameter initialisers (`torch.nn.init` names), drawing from tinyformer's generator
so that `tinyformer.manual_seed(s)` makes a model's initial weights reproducible."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from tinyformer import random
from tinyformer.tensor import Tensor

__all__ = ["fan_in_uniform_", "normal_", "ones_", "skip_init", "uniform_", "zeros_"]

_skipping = [False]


@contextlib.contextmanager
def skip_init() -> Iterator[None]:
    """Inside the block every initialiser leaves its tensor as it is (zeros, as the layers
    allocate them). For models whose weights are loaded right after they are built: drawing
    110M random numbers for bert-base takes seconds, and the draws would be overwritten."""
    _skipping.append(True)
    try:
        yield
    finally:
        _skipping.pop()


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    if _skipping[-1]:
        return tensor
    draw = random.generator().standard_normal(tensor.shape)
    tensor.data[...] = (mean + std * draw).astype(tensor.dtype)
    return tensor


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    if _skipping[-1]:
        return tensor
    tensor.data[...] = random.generator().uniform(a, b, tensor.shape).astype(tensor.dtype)
    return tensor


def zeros_(tensor: Tensor) -> Tensor:
    tensor.data[...] = 0
    return tensor


def ones_(tensor: Tensor) -> Tensor:
    tensor.data[...] = 1
    return tensor


def fan_in_uniform_(tensor: Tensor, fan_in: int) -> Tensor:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for Linear weights and biases."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform_(tensor, -bound, bound)
