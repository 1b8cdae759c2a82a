"""The CUDA kernels' calls at the sizes the baby and small GPTs make them: one list of cases that
the GPU tests (tests/test_cuda_gpu.py) check against the references and the benchmark
(benchmarks/cuda_kernels_vs_torch.py) times beside PyTorch's ops."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend

__all__ = ["SIZES", "kernel_cases", "to_device"]

# (batch * heads * T, T) score rows, (batch * T, vocab) logits, (batch * T, width) activations
SIZES = {
    "tiny": dict(b=2, h=2, t=8, c=16, v=11),
    "baby": dict(b=12, h=4, t=64, c=128, v=65),
    "small": dict(b=64, h=6, t=256, c=384, v=65),
}


def kernel_cases(size: str, dtype: Any) -> list[tuple[str, tuple, dict]]:
    """(primitive, args, kwargs) for every CUDA kernel's primitive at `size`, host arrays of
    `dtype` drawn from a fixed seed."""
    s = SIZES[size]
    rng = np.random.default_rng(0)
    rows, d = s["b"] * s["t"], s["c"] // s["h"]

    def randn(*shape):
        return rng.standard_normal(shape).astype(dtype)

    target = rng.integers(0, s["v"], rows)
    target[::7] = -100
    scores, logits, act = (
        randn(s["b"] * s["h"] * s["t"], s["t"]),
        randn(rows, s["v"]),
        randn(rows, s["c"]),
    )
    q, k, v = (randn(s["b"], s["h"], s["t"], d) for _ in range(3))
    mu, rstd = act.mean(1), (1 / np.sqrt(act.var(1) + 1e-5)).astype(dtype)
    return [
        ("softmax.forward", (scores,), {}),
        ("softmax.backward", (randn(*scores.shape), np.abs(scores) / 100), {}),
        ("log_softmax.forward", (logits,), {}),
        ("log_softmax.backward", (randn(*logits.shape), -np.abs(logits)), {}),
        ("cross_entropy.forward", (logits, target, -100, 0.1), {}),
        ("cross_entropy.backward", (randn(rows), logits, target, logits.max(1) + 1, -100, 0.1), {}),
        ("layer_norm.forward", (act, randn(s["c"]), randn(s["c"]), 1e-5), {}),
        ("layer_norm.backward", (randn(*act.shape), act, randn(s["c"]), mu, rstd), {}),
        ("gelu.forward", (act, "tanh"), {}),
        ("gelu.forward", (act, "none"), {}),
        ("gelu.backward", (randn(*act.shape), act, "tanh"), {}),
        ("gelu.backward", (randn(*act.shape), act, "none"), {}),
        ("dropout.forward", (act, 0.1, 1234), {}),
        ("dropout.backward", (randn(*act.shape), rng.random(act.shape) > 0.1, 0.1), {}),
        ("embedding.backward", (randn(rows, s["c"]), target.clip(0), s["v"], None), {}),
        ("attention.forward", (q, k, v, None, True, d**-0.5), {}),
        ("attention.forward", (q, k, v, None, False, d**-0.5), {}),
    ]  # fmt: skip


def to_device(device: Any, value: Any) -> Any:
    """`value` on `device` if it is a host array, else unchanged (flags, ints, None)."""
    return backend.to_device(value, device) if isinstance(value, np.ndarray) else value
