"""CUDA kernels for dropout: the reference's counter-based splitmix64 mask, regenerated from
(seed, i) in one grid-stride elementwise launch (plan in dropout.cu)."""

from __future__ import annotations

import math
from typing import Any

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry
from tinyformer.registry import kernel

THREADS = 256
# A grid-stride loop needs no more blocks than the GPU runs at once (an H100 holds 132 SMs x
# 8 blocks of 256 threads); a few times that keeps every SM busy to the end of the array.
MAX_BLOCKS = 4096


def _launch(name: str, n: int, args: tuple) -> None:
    if n:
        blocks = min(MAX_BLOCKS, _runtime.blocks(n, THREADS))
        _runtime.load("dropout").launch(name, blocks, THREADS, args)


def keep_threshold(p: float) -> int:
    """The integer k0 with: the reference keeps u = k * 2^-53 >= p  <=>  k >= k0. p * 2^53 is
    exact in float64 (a power-of-two scaling), so its ceiling is exact too."""
    return math.ceil(float(p) * 2.0**53)


@kernel("dropout.forward", backend="cuda", dtypes=FLOATS)
def dropout_forward(x: Any, p: float, seed: int) -> tuple[Any, Any]:
    """-> y, keep (bool, x's shape)."""
    xp = get_array_module(x)
    x1 = xp.ascontiguousarray(x)  # 1-d for a 0-d x (ascontiguousarray's ndim >= 1)
    y, keep = xp.empty_like(x1), xp.empty(x1.shape, dtype=bool)
    scale = x.dtype.type(1.0 / (1.0 - p))  # as the reference rounds it
    args = (x1, y, keep, x1.size, seed, keep_threshold(p), scale)
    _launch(entry("dropout_forward", x1), x1.size, args)
    return y.reshape(x.shape), keep.reshape(x.shape)


@kernel("dropout.backward", backend="cuda", dtypes=FLOATS)
def dropout_backward(gy: Any, keep: Any, p: float) -> Any:
    xp = get_array_module(gy)
    g1, keep1 = xp.ascontiguousarray(gy), xp.ascontiguousarray(keep, dtype=bool)
    gx = xp.empty_like(g1)
    scale = gy.dtype.type(1.0 / (1.0 - p))
    _launch(entry("dropout_backward", g1), g1.size, (g1, keep1, gx, g1.size, scale))
    return gx.reshape(gy.shape)
