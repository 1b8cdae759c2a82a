"""The CUDA kernels without a GPU: every `.cu` file compiles with NVRTC for the GPUs we target,
every kernel has its source, its reference and its checks, and the CPU emulator that runs them
in CI behaves as CUDA does (shuffles, barriers, block reductions, exited threads, atomics).

The kernels' values are checked against their references by the generic suite
(tests/test_ops_generic.py, `backend[cuda]`): on the emulator here, on the GPU where one exists;
past one warp and one tile by tests/test_cuda_large.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from tinyformer import registry
from tinyformer.fake_device import to_fake
from tinyformer.kernels.cuda import _emulator, _nvrtc, _runtime
from tinyformer.testing import all_specs

CUDA_DIR = Path(_runtime.HERE)
SOURCES = [p.stem for p in _nvrtc.sources()]
# Primitives with a CUDA kernel but no op spec (no Function to gradcheck): where they are tested.
DEDICATED = {
    "adamw.step": "tests/test_adamw_many.py",
    "adamw.step_many": "tests/test_adamw_many.py",
    "clip_grad_norm.many": "tests/test_clip_many.py",
}


def _nvrtc_or_skip() -> None:
    try:
        _nvrtc.library()
    except _nvrtc.NvrtcUnavailable as e:
        if os.environ.get("CI"):  # CI installs it: a silent skip there would hide a broken install
            raise
        pytest.skip(str(e))


@pytest.mark.parametrize("arch", _nvrtc.ARCHITECTURES)
@pytest.mark.parametrize("op", SOURCES)
def test_every_cuda_source_compiles_with_nvrtc(op, arch):
    _nvrtc_or_skip()
    cubin = _nvrtc.compile_cuda(_runtime.source(op), f"{op}.cu", arch=arch)
    assert cubin[:4] == b"\x7fELF"  # a cubin is an ELF image


def test_a_compile_error_names_the_file_and_line():
    _nvrtc_or_skip()
    text = _runtime.source("softmax").replace("top = block_max(top);", "top = block_max(top)")
    line = 1 + (CUDA_DIR / "softmax.cu").read_text().splitlines().index("    top = block_max(top);")
    with pytest.raises(_nvrtc.CompileError, match=rf"softmax\.cu\({line + 1}\): error"):
        _nvrtc.compile_cuda(text, "softmax.cu", arch="sm_90")


def test_included_headers_keep_their_own_line_numbers():
    text = _runtime.source("softmax")
    assert '#line 1 "common.cuh"' in text and '#include "common.cuh"' not in text


def _cuda_primitives() -> dict[str, str]:
    """primitive -> the module that registers its CUDA kernel."""
    found = {}
    for name in registry.primitives():
        impl = registry._table[name].get("cuda")
        if impl is not None:
            found[name] = impl.fn.__module__
    return found


def test_every_cuda_kernel_has_its_source_reference_and_checks():
    covered = {p for spec in all_specs() for p in spec.primitives}
    root = CUDA_DIR.parent.parent
    # the GPU tests' cases live beside the benchmarks that share them
    on_gpu = "".join(
        (root / path).read_text()
        for path in (
            "tests/test_cuda_gpu.py",
            "tinyformer/testing/kernel_cases.py",
            "tests/test_cuda_gemm.py",  # the linear layers' GEMM, forced (eager runs cuBLAS)
        )
    )
    primitives = _cuda_primitives()
    assert "softmax.forward" in primitives  # the kernel files were found at all
    for name, module in primitives.items():
        op = module.rsplit(".", 1)[-1]
        assert (CUDA_DIR / f"{op}.cu").is_file(), f"{name}: {module} has no {op}.cu beside it"
        assert registry.REFERENCE in registry.backends(name), f"{name} has no NumPy reference"
        assert f'"{name}"' in on_gpu or name in DEDICATED, f"{name}: no GPU case (test_cuda_gpu.py)"
        if name not in covered:
            test = DEDICATED.get(name)
            assert test, f"{name}: no op spec lists it, so the generic suite never checks it"
            assert (CUDA_DIR.parent.parent / test).is_file(), f"{name}: {test} is missing"


def test_every_source_has_a_plan_and_entry_points_per_dtype():
    for op in SOURCES:
        text = (CUDA_DIR / f"{op}.cu").read_text()
        assert text.startswith("//"), f"{op}.cu must open with its plan, as a comment block"
        names = _runtime.entries(_runtime.source(op))
        assert names, f'{op}.cu has no extern "C" __global__ entry point'
        for name in names:
            assert re.search(r"_(f32|f64)$", name), (
                f"{op}.cu: entry point {name} must end in its dtype"
            )


# -- the emulator --------------------------------------------------------------------------------

PROBE = r"""
#include "common.cuh"
extern "C" __global__ void probe(const float* x, float* out, int n) {
    // out[0..n): warp_sum of x per warp; out[n..2n): block_sum; out[2n..3n): xor-shuffled x;
    // out[3n..4n): shfl_down by 1 (lanes past the warp keep their own value)
    int t = threadIdx.x;
    float v = t < n ? x[t] : 0.0f;
    float w = warp_sum(v), b = block_sum(v);
    float s = __shfl_xor_sync(0xffffffffu, v, 1);
    float d = __shfl_down_sync(0xffffffffu, v, 1);
    if (t < n) { out[t] = w; out[n + t] = b; out[2 * n + t] = s; out[3 * n + t] = d; }
}
extern "C" __global__ void survivors(float* out) {
    // Threads that return early leave the barrier: the others still meet at __syncthreads.
    __shared__ float cell[1];
    if (threadIdx.x % 2) return;
    if (threadIdx.x == 0) cell[0] = 7.0f;
    __syncthreads();
    out[threadIdx.x] = cell[0];
}
extern "C" __global__ void survivors_by_block(float* out) {
    // Which threads return early changes from block to block; each block's barrier waits for
    // its own survivors (the emulator reuses one set of fibers, and their stacks, for every block).
    __shared__ float cell[1];
    if ((threadIdx.x + blockIdx.x) % 2) return;
    if (threadIdx.x == blockIdx.x % 2) cell[0] = 7.0f + blockIdx.x;
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = cell[0];
}
extern "C" __global__ void where_am_i(int* out) {
    int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out[block * blockDim.x * blockDim.y * blockDim.z + thread] = 1000 * block + thread;
}
extern "C" __global__ void count(unsigned long long* total, double* sum, double value) {
    atomicAdd(total, 1ull);
    atomicAdd(sum, value);
}
extern "C" __global__ void unsynced(float* out, float stamp) {
    // No barrier between the write and the read: a race on a GPU.
    __shared__ float cell[64];
    cell[threadIdx.x] = stamp + threadIdx.x;
    out[threadIdx.x] = cell[(threadIdx.x + 1) % 64];
}
extern "C" __global__ void stuck(float* out) {
    // Thread 0 waits for the block, its warp's other lanes for their warp: neither can open.
    if (threadIdx.x == 0) __syncthreads(); else __syncwarp();
    out[threadIdx.x] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def probe():
    return _runtime.Module("probe", _runtime._expand(PROBE, "probe.cu"))


def test_emulated_shuffles_and_block_reductions(probe):
    n = 96  # three warps
    x = np.arange(n, dtype=np.float32)
    out = to_fake(np.zeros(4 * n, np.float32))
    probe.launch("probe", 1, n, (to_fake(x), out, n))
    got = out.get().reshape(4, n)
    warps = x.reshape(3, 32).sum(axis=1)
    np.testing.assert_array_equal(got[0], np.repeat(warps, 32))
    np.testing.assert_array_equal(got[1], np.full(n, x.sum()))
    np.testing.assert_array_equal(got[2], x.reshape(-1, 2)[:, ::-1].reshape(-1))
    down = np.where(np.arange(n) % 32 == 31, x, np.roll(x, -1))
    np.testing.assert_array_equal(got[3], down)


def test_emulated_threads_that_return_early_do_not_block_the_barrier(probe):
    out = to_fake(np.full(64, -1.0, np.float32))
    probe.launch("survivors", 1, 64, (out,))
    np.testing.assert_array_equal(out.get(), np.where(np.arange(64) % 2, -1.0, 7.0))


def test_emulated_blocks_each_meet_at_a_barrier_of_their_own(probe):
    out = to_fake(np.full(4 * 64, -1.0, np.float32))
    probe.launch("survivors_by_block", 4, 64, (out,))
    block, thread = np.divmod(np.arange(4 * 64), 64)
    np.testing.assert_array_equal(out.get(), np.where((block + thread) % 2, -1.0, 7.0 + block))


def test_a_missing_barrier_reads_what_later_threads_have_not_written(probe):
    # Threads run in rank order, each up to its next barrier: without one, every thread but
    # the last reads its neighbour's cell before the neighbour writes it, on every run.
    for stamp in (100.0, 200.0):  # the cells keep the last launch's values, as on a GPU
        out = to_fake(np.full(64, -1.0, np.float32))
        probe.launch("unsynced", 1, 64, (out, stamp))
        written = stamp + (np.arange(64) + 1) % 64
        got = out.get()
        assert (got[:63] != written[:63]).all() and got[63] == written[63]


def test_threads_stuck_at_barriers_that_cannot_open_are_an_error_not_a_hang(probe):
    out = to_fake(np.zeros(64, np.float32))
    with pytest.raises(
        RuntimeError,
        match=r"stuck: block \(0, 0, 0\) can never go on: "
        r"1 threads wait at __syncthreads\(\) and 31 at a warp's barrier",
    ):
        probe.launch("stuck", 1, 64, (out,))
    probe.launch("survivors", 1, 64, (out,))  # the next launch starts clean


def test_emulated_grid_and_block_indices_in_three_dimensions(probe):
    grid, block = (2, 3, 2), (4, 2, 2)
    out = to_fake(np.full(12 * 16, -1, np.int32))
    probe.launch("where_am_i", grid, block, (out,))
    expected = [1000 * b + t for b in range(12) for t in range(16)]
    np.testing.assert_array_equal(out.get(), expected)


def test_emulated_atomics_add_exactly(probe):
    total, acc = to_fake(np.zeros(1, np.uint64)), to_fake(np.zeros(1, np.float64))
    probe.launch("count", 5, 128, (total, acc, 0.5))
    assert int(total.get()[0]) == 640 and float(acc.get()[0]) == 320.0


def test_launch_errors_name_the_problem(probe):
    x = to_fake(np.zeros((4, 8), np.float32))
    with pytest.raises(KeyError, match="no entry point 'nope'"):
        probe.launch("nope", 1, 32, (x,))
    with pytest.raises(TypeError, match="takes 3 arguments, got 1"):
        probe.launch("probe", 1, 32, (x,))
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        probe.launch("probe", 1, 32, (x, x[:, ::2], 4))
    with pytest.raises(ValueError, match="1 to 3 positive integers"):
        probe.launch("probe", 0, 32, (x, x, 4))
    with pytest.raises(TypeError, match="type the launcher cannot pass"):
        _runtime.entries('extern "C" __global__ void k(float2 v) {}')


def test_emulator_compile_errors_are_reported():
    module = _runtime.Module("broken", 'extern "C" __global__ void k(float* x) { x[0] = ; }')
    with pytest.raises(RuntimeError, match="broken.cu does not compile for the CUDA emulator"):
        module.launch("k", 1, 32, (to_fake(np.zeros(1, np.float32)),))


def test_the_emulator_caches_compiled_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYFORMER_CACHE", str(tmp_path))
    text = _runtime._expand(PROBE, "probe.cu")
    _emulator.compile_module(text, _runtime.entries(text), "probe")
    built = list((tmp_path / "cuda-emulator").glob("probe-*.so"))
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    _emulator.compile_module(text, _runtime.entries(text), "probe")
    assert built[0].stat().st_mtime_ns == stamp


# -- choosing the kernels --------------------------------------------------------------------------


def test_the_fake_device_runs_cuda_kernels_only_when_cuda_is_preferred():
    assert registry.implementation("softmax.forward", to_fake(np.zeros(2, "f4"))).backend == "numpy"
    with registry.prefer("cuda"):
        fake = registry.implementation("softmax.forward", to_fake(np.zeros(2, "f4")))
        host = registry.implementation("softmax.forward", np.zeros(2, "f4"))
        text = registry.explain("softmax.forward", np.float32, "fake")
    assert fake.backend == "cuda" and host.backend == "numpy"
    assert "emulated on the fake device" in text


@pytest.mark.parametrize("chunk", [1, 3, 32])
def test_embedding_backward_sums_runs_that_cross_chunks(chunk, monkeypatch):
    """The kernel cuts the sorted indices into chunks; a frequent index's run crosses many.
    The op specs draw too few rows to cross often, so small chunks force it here."""
    from tinyformer.kernels.cuda import embedding
    from tinyformer.ops.embedding import embedding_backward as reference

    monkeypatch.setattr(embedding, "CHUNK", chunk)
    rng = np.random.default_rng(0)
    indices = np.concatenate([np.full(20, 3), rng.integers(0, 7, 30), np.full(9, 5)])
    rng.shuffle(indices)
    gy = rng.standard_normal((indices.size, 5))
    for padding in (None, 3):
        want = reference(gy, indices, 7, padding)
        got = embedding.embedding_backward(to_fake(gy), to_fake(indices), 7, padding).get()
        again = embedding.embedding_backward(to_fake(gy), to_fake(indices), 7, padding).get()
        # pieces of a run are summed, then added in chunk order: not the reference's order
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
        np.testing.assert_array_equal(got, again)  # but a fixed order: the same bits every run
