"""The AdamW update primitive: the reference matches PyTorch's AdamW, and every kernel matches
the reference."""

from __future__ import annotations

import numpy as np
import pytest

from tinyformer import backend as backends
from tinyformer import registry
from tinyformer.optim.adamw_step import adamw_step
from tinyformer.testing.checks import backend_device

HYPER = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1}


def _run(backend, dtype, steps=5, seed=0):
    """p, m, v after `steps` updates by `backend`'s kernel, on its device (the CUDA kernel's:
    the GPU, or the fake device through the emulator), returned as host arrays."""
    device = backend_device(backend)
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((7, 5)).astype(dtype)
    m, v = np.zeros_like(p), np.zeros_like(p)
    if device is not None:
        p, m, v = (backends.to_device(a, device) for a in (p, m, v))
    with registry.prefer(backend):
        for step in range(1, steps + 1):
            g = rng.standard_normal(p.shape).astype(dtype)
            g = g if device is None else backends.to_device(g, device)
            registry.call("adamw.step", p, g, m, v, step=step, **HYPER)
    return tuple(backends.to_host(a) for a in (p, m, v))


KERNELS = [b for b in registry.backends("adamw.step") if b != "numpy"]
TOLERANCES = [(np.float32, 1e-6), (np.float64, 1e-13)]


def check_kernel(backend, dtype, tol):
    for ours, ref in zip(_run(backend, dtype), _run("numpy", dtype)):
        np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", KERNELS)
@pytest.mark.parametrize("dtype, tol", TOLERANCES)
def test_kernel_matches_reference(backend, dtype, tol):
    check_kernel(backend, dtype, tol)


@pytest.mark.torch
def test_reference_matches_pytorch_adamw():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal(p0.shape) for _ in range(5)]
    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for step, g in enumerate(grads, start=1):
        adamw_step(p, g, m, v, step=step, **HYPER)
    tp = torch.tensor(p0, requires_grad=True)
    opt = torch.optim.AdamW(
        [tp], lr=HYPER["lr"], betas=(HYPER["beta1"], HYPER["beta2"]), eps=HYPER["eps"],
        weight_decay=HYPER["weight_decay"],
    )  # fmt: skip
    for g in grads:
        tp.grad = torch.from_numpy(g)
        opt.step()
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-12, atol=1e-12)
