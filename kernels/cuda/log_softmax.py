"""CUDA kernels for log_softmax over the last axis: one block per row, an online log-sum-exp
(plan in log_softmax.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, rowwise
from tinyformer.registry import kernel

_module = _runtime.load


@kernel("log_softmax.forward", backend="cuda", dtypes=FLOATS)
def log_softmax_forward(x: Any) -> Any:
    return rowwise(_module("log_softmax"), "log_softmax_forward", x)


@kernel("log_softmax.backward", backend="cuda", dtypes=FLOATS)
def log_softmax_backward(gy: Any, y: Any) -> Any:
    return rowwise(_module("log_softmax"), "log_softmax_backward", gy, y)
