"""CUDA kernels for GELU, exact and tanh forms: one grid-stride elementwise launch each way
(plan in gelu.cu)."""

from __future__ import annotations

from typing import Any

from tinyformer.backend import get_array_module
from tinyformer.kernels.cuda import _runtime
from tinyformer.kernels.cuda._rows import FLOATS, entry
from tinyformer.registry import kernel

THREADS = 256
# A grid-stride loop needs no more blocks than the GPU runs at once (an H100 holds 132 SMs x
# 8 blocks of 256 threads); a few times that keeps every SM busy to the end of the array.
MAX_BLOCKS = 4096
FORMS = {"none": 0, "tanh": 1}  # the kernels' `tanh_form` argument


def _form(approximate: str) -> int:
    if approximate not in FORMS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return FORMS[approximate]


def _launch(name: str, n: int, args: tuple) -> None:
    if n:
        blocks = min(MAX_BLOCKS, _runtime.blocks(n, THREADS))
        _runtime.load("gelu").launch(name, blocks, THREADS, args)


@kernel("gelu.forward", backend="cuda", dtypes=FLOATS)
def gelu_forward(x: Any, approximate: str) -> Any:
    xp = get_array_module(x)
    x1 = xp.ascontiguousarray(x)  # 1-d for a 0-d x (ascontiguousarray's ndim >= 1)
    y = xp.empty_like(x1)
    _launch(entry("gelu_forward", x1), x1.size, (x1, y, x1.size, _form(approximate)))
    return y.reshape(x.shape)


@kernel("gelu.backward", backend="cuda", dtypes=FLOATS)
def gelu_backward(gy: Any, x: Any, approximate: str) -> Any:
    xp = get_array_module(gy)
    g1, x1 = xp.ascontiguousarray(gy), xp.ascontiguousarray(x, dtype=gy.dtype)
    gx = xp.empty_like(g1)  # gy's dtype, as the reference returns
    _launch(entry("gelu_backward", g1), g1.size, (g1, x1, gx, g1.size, _form(approximate)))
    return gx.reshape(gy.shape)
