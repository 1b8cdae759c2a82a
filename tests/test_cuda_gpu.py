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
from tinyformer.testing.kernel_cases import SIZES, kernel_cases, to_device

needs_gpu = pytest.mark.skipif(not backend.cuda_available(), reason="needs CuPy and a GPU")


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
    for name, args, kwargs in kernel_cases(size, dtype):
        if "cuda" not in registry.backends(name):
            continue
        args = tuple(to_device(device, a) for a in args)
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
