"""The CUDA kernels past one warp and one tile, on the CPU emulator.

The op specs draw sides of at most a few elements, and test_cuda_gpu.py's emulator case is
tiny, so each kernel's second warp, second column per thread, second attention tile, the
online log-sum-exp rescale past 256 columns, and layer norm's column sum over many partial
blocks would otherwise run only on a GPU. Each case here sits just past those thresholds:
rows of 40 columns (two warps) and 300 columns (256 threads, some with two columns), 40 rows
for layer norm (ten partial blocks, more than the eight warps that sum them), 40 queries and
keys for attention (two or three tiles each way), 70 looked-up rows for the embedding
(three chunks), grids of two blocks for the elementwise kernels (each thread strides), in
float32 and float64.

`check_kernel(name, dtype)` is the check; tests/test_mutation_dedicated.py plants bugs in the
`.cu` sources and requires it to fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from tinyformer import registry
from tinyformer.fake_device import to_fake
from tinyformer.kernels.cuda import attention, dropout, gelu, layer_norm

COLUMNS = (40, 300)  # two warps; past 256 threads a row, so a second column per thread
TOL = {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-13)}  # rtol, atol per unit of scale
Case = tuple[str, tuple]


def _rows(rng: np.random.Generator, cols: int, dtype) -> np.ndarray:
    """Three random rows and a rising ramp: in the ramp every thread's later column is its
    largest, so the online log-sum-exp must rescale what it summed before."""
    x = rng.standard_normal((4, cols)) * 3
    x[3] = np.linspace(-4, 4, cols)
    return x.astype(dtype)


def _softmax(rng, dtype) -> Iterator[Case]:
    for cols in COLUMNS:
        x, gy = _rows(rng, cols, dtype), _rows(rng, cols, dtype)
        with registry.prefer(registry.REFERENCE):
            y = registry.call("softmax.forward", x)
        yield "softmax.forward", (x,)
        yield "softmax.backward", (gy, y)


def _log_softmax(rng, dtype) -> Iterator[Case]:
    for cols in COLUMNS:
        x, gy = _rows(rng, cols, dtype), _rows(rng, cols, dtype)
        with registry.prefer(registry.REFERENCE):
            y = registry.call("log_softmax.forward", x)
        yield "log_softmax.forward", (x,)
        yield "log_softmax.backward", (gy, y)


def _cross_entropy(rng, dtype) -> Iterator[Case]:
    for cols in COLUMNS:
        logits = _rows(rng, cols, dtype)
        target = np.array([cols - 1, -100, 0, cols // 2 + 3])  # classes past 256 too
        gloss = rng.standard_normal(4).astype(dtype)
        for eps in (0.0, 0.1):
            with registry.prefer(registry.REFERENCE):
                _, lse = registry.call("cross_entropy.forward", logits, target, -100, eps)
            yield "cross_entropy.forward", (logits, target, -100, eps)
            yield "cross_entropy.backward", (gloss, logits, target, lse, -100, eps)


def _layer_norm(rng, dtype) -> Iterator[Case]:
    for cols in COLUMNS:
        x = (rng.standard_normal((40, cols)) * 2 + 1).astype(dtype)
        gy = rng.standard_normal((40, cols)).astype(dtype)
        w, b = (rng.standard_normal(cols).astype(dtype) for _ in range(2))
        for affine in ((w, b), (None, None)):
            with registry.prefer(registry.REFERENCE):
                _, mu, rstd = registry.call("layer_norm.forward", x, *affine, 1e-5)
            yield "layer_norm.forward", (x, *affine, 1e-5)
            yield "layer_norm.backward", (gy, x, affine[0], mu, rstd)


def _gelu(rng, dtype) -> Iterator[Case]:
    x = (rng.standard_normal((40, 300)) * 3).astype(dtype)
    gy = rng.standard_normal((40, 300)).astype(dtype)
    for form in ("none", "tanh"):
        yield "gelu.forward", (x, form)
        yield "gelu.backward", (gy, x, form)


def _dropout(rng, dtype) -> Iterator[Case]:
    x = rng.standard_normal((40, 300)).astype(dtype)
    gy = rng.standard_normal((40, 300)).astype(dtype)
    with registry.prefer(registry.REFERENCE):
        _, keep = registry.call("dropout.forward", x, 0.25, 77)
    yield "dropout.forward", (x, 0.25, 77)
    yield "dropout.backward", (gy, keep, 0.25)


def _embedding(rng, dtype) -> Iterator[Case]:
    # rows of 40 and 300 columns (threads across the columns), 70 looked-up rows: three chunks
    # of 32 sorted positions, with runs of index 2 and 5 crossing chunk boundaries
    indices = np.concatenate([np.full(30, 2), rng.integers(0, 9, 30), np.full(10, 5)])
    rng.shuffle(indices)
    for cols in COLUMNS:
        gy = rng.standard_normal((indices.size, cols)).astype(dtype)
        for padding in (None, 5):
            yield "embedding.backward", (gy, indices, 9, padding)


def _attention(rng, dtype) -> Iterator[Case]:
    # 40 queries and keys: three float32 query tiles of 16 and two key tiles of 32 (float64:
    # five query tiles of 8, three key tiles of 16); a head of 40 gives each lane two features.
    d = 40
    q, k, v, gy = (rng.standard_normal((1, 2, 40, d)).astype(dtype) for _ in range(4))
    padding = np.ones((1, 1, 1, 40), bool)
    padding[..., 35:] = False  # the last keys, in the second (or third) key tile
    bias = rng.standard_normal((40, 40)).astype(dtype)
    for mask, causal in ((None, False), (None, True), (padding, False), (bias, True)):
        with registry.prefer(registry.REFERENCE):
            y, lse = registry.call("attention.forward", q, k, v, mask, causal, d**-0.5)
        yield "attention.forward", (q, k, v, mask, causal, d**-0.5)
        yield "attention.backward", (gy, q, k, v, y, lse, mask, causal, d**-0.5)


CASES: dict[str, Callable[..., Iterator[Case]]] = {
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "cross_entropy": _cross_entropy,
    "layer_norm": _layer_norm,
    "gelu": _gelu,
    "dropout": _dropout,
    "embedding": _embedding,
    "attention": _attention,
}


def _fake(value):
    return to_fake(value) if isinstance(value, np.ndarray) else value


def _host(value) -> list:
    values = value if isinstance(value, tuple) else (value,)
    return [v.get() if hasattr(v, "get") else v for v in values]


def check_kernel(kernel: str, dtype) -> None:
    """Every case of `kernel` (a key of CASES) run by its CUDA kernel on the emulator equals the
    NumPy reference: float32 to a relative 1e-5, float64 to 1e-12."""
    rtol, atol = TOL[dtype]
    rng = np.random.default_rng(0)
    for name, args in CASES[kernel](rng, dtype):
        with registry.prefer(registry.REFERENCE):
            want = _host(registry.call(name, *args))
        fake = tuple(_fake(a) for a in args)
        with registry.prefer("cuda"):
            impl = registry.choose(name, *fake)
            assert impl.backend == "cuda", registry.explain(name, dtype, "fake")
            got = _host(impl.fn(*fake))
        for i, (g, w) in enumerate(zip(got, want)):
            what = f"{name} output {i}, {np.dtype(dtype).name}, args {[np.shape(a) for a in args]}"
            if w.dtype == bool:
                np.testing.assert_array_equal(g, w, err_msg=what)
                continue
            scale = max(1.0, float(np.nanmax(np.abs(w), initial=0)))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale, err_msg=what)


# CUDA kernel files checked at large sizes elsewhere
ELSEWHERE = {
    "adamw": "tests/test_adamw_many.py (shapes around a warp, a chunk, several chunks)",
    "clip": "tests/test_clip_many.py (shapes around a warp and a block, several work items)",
    "gemm": "tests/test_cuda_gemm.py (a second 64-row and 64-column tile, K past one 16-step "
    "tile, batches past the grid's limit)",
}


def test_every_cuda_kernel_file_has_a_large_case():
    """A new kernel file gets a case here (or a reason it is checked elsewhere)."""
    files = set()
    for name in registry.primitives():
        impl = registry._table[name].get("cuda")
        if impl is not None:
            files.add(impl.fn.__module__.rsplit(".", 1)[-1])
    assert "softmax" in files  # the kernels were found at all
    missing = files - set(CASES) - set(ELSEWHERE)
    assert not missing, f"CUDA kernel files with no case past one warp and one tile: {missing}"


@pytest.fixture
def grid_strides(monkeypatch):
    """Grids of two blocks for the elementwise kernels, so each thread strides over many
    elements (at full size the grid would cover the array in one step)."""
    monkeypatch.setattr(gelu, "MAX_BLOCKS", 2)
    monkeypatch.setattr(dropout, "MAX_BLOCKS", 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("kernel", sorted(CASES))
def test_cuda_kernel_past_one_warp_and_one_tile(kernel, dtype, grid_strides):
    check_kernel(kernel, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_layer_norm_backward_with_more_rows_than_warps_a_block(dtype, monkeypatch):
    """At most 8 partial rows: 40 rows give blocks of 5 rows for 4 warps, so one warp takes
    a second row in phase A, and phase B sums 5 rows a column."""
    monkeypatch.setattr(layer_norm, "MAX_PARTS", 8)
    assert layer_norm._rows_per_block(40) == 5
    check_kernel("layer_norm", dtype)


def test_attention_cases_cross_tiles_both_ways():
    """The sizes above are past the tiles of both dtypes (a stale table would hide it)."""
    for dtype in ("float32", "float64"):
        bound = attention.head_bound(np.zeros((1, 40), dtype), np.zeros((1, 40), dtype))
        assert bound > 32  # two features a lane
        tiles = (attention.FORWARD_ROWS, attention.BACKWARD_ROWS, attention.KEYS)
        assert all(40 > table[dtype][bound] for table in tiles)
