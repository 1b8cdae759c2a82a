"""CUDA kernels for softmax over the last axis: one block per row (plan in softmax.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, rowwise
from tinyformer.registry import kernel

_module = _runtime.load


@kernel("softmax.forward", backend="cuda", dtypes=FLOATS)
def softmax_forward(x: Any) -> Any:
    return rowwise(_module("softmax"), "softmax_forward", x)


@kernel("softmax.backward", backend="cuda", dtypes=FLOATS)
def softmax_backward(gy: Any, y: Any) -> Any:
    return rowwise(_module("softmax"), "softmax_backward", gy, y)
