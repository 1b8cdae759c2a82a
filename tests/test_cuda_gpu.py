"""The CUDA kernels on a real GPU, at the sizes the baby and small GPTs run them: each primitive
against its reference run by CuPy on the same GPU. Skipped without CuPy and a GPU; CI runs the
same cases at a tiny size on the fake device, through the CPU emulator, so that this file's
own plumbing is tested everywhere.

Run on a GPU machine: `python -m pytest -q tests/test_cuda_gpu.py` (benchmarks/gpu_check.py
runs it as its first part).
"""

from __future__ import annotations

import numpy as np
import pytest

from tinyformer import backend, registry

needs_gpu = pytest.mark.skipif(not backend.cuda_available(), reason="needs CuPy and a GPU")

# (batch * heads * T, T) score rows, (batch * T, vocab) logits, (batch * T, width) activations
SIZES = {
    "tiny": dict(b=2, h=2, t=8, c=16, v=11),
    "baby": dict(b=12, h=4, t=64, c=128, v=65),
    "small": dict(b=64, h=6, t=256, c=384, v=65),
}


def _cases(size: str, dtype) -> list[tuple[str, tuple, dict]]:
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


def _to(device, value):
    return backend.to_device(value, device) if isinstance(value, np.ndarray) else value


def _host(value):
    if isinstance(value, tuple):
        return [_host(v) for v in value]
    return backend.to_host(value) if backend.is_device_array(value) else value


def _compare(got, want, name, rtol):
    if isinstance(want, list):
        for g, w in zip(got, want):
            _compare(g, w, name, rtol)
        return
    want = np.asarray(want)
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        scale = max(1.0, float(np.abs(want).max(initial=0)))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=name)


def _check_every_kernel(device: str, size: str, dtype) -> None:
    rtol = 2e-4 if dtype == np.float32 else 1e-10
    ran = []
    for name, args, kwargs in _cases(size, dtype):
        if "cuda" not in registry.backends(name):
            continue
        args = tuple(_to(device, a) for a in args)
        with registry.prefer(registry.REFERENCE):
            want = _host(registry.call(name, *args, **kwargs))
        with registry.prefer("cuda"):
            impl = registry.choose(name, *args, **kwargs)
            assert impl.backend == "cuda", registry.explain(name, dtype, device)
            got = _host(impl.fn(*args, **kwargs))
        _compare(got, want, f"{name} {size} {np.dtype(dtype).name}", rtol)
        ran.append(name)
    assert "softmax.forward" in ran


@needs_gpu
@pytest.mark.parametrize("size", ["baby", "small"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_cuda_kernel_matches_its_reference_on_the_gpu(size, dtype):
    _check_every_kernel("cuda", size, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_same_cases_on_the_emulator(dtype):
    _check_every_kernel("fake", "tiny", dtype)


@needs_gpu
def test_attention_backward_matches_on_the_gpu():
    if "cuda" not in registry.backends("attention.backward"):
        pytest.skip("no CUDA attention kernel registered")
    import cupy

    s, rng = SIZES["baby"], np.random.default_rng(1)
    d = s["c"] // s["h"]
    q, k, v, gy = (cupy.asarray(rng.standard_normal((s["b"], s["h"], s["t"], d)), np.float32)
                   for _ in range(4))  # fmt: skip
    with registry.prefer(registry.REFERENCE):
        y, lse = registry.call("attention.forward", q, k, v, None, True, d**-0.5)
        want = registry.call("attention.backward", gy, q, k, v, y, lse, None, True, d**-0.5)
    got = registry.call("attention.backward", gy, q, k, v, y, lse, None, True, d**-0.5)
    _compare(_host(tuple(got)), _host(tuple(want)), "attention.backward", 2e-4)
