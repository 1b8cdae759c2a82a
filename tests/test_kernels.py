"""Kernel-specific checks beyond the generic comparison: the vectorised exps, GELU's erfc and its
tanh form at extreme inputs, the row maximum, the workers' task counter, the transposed copy,
the register tiles, the registry's fallback rules, linear's kernel and the bench's BLAS threads.
Attention's kernels: test_attention_kernel.py; the conv family's and pooling's:
test_vision_kernels.py."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from tinyformer import registry

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def vector_exp():
    from numba import njit, prange

    from tinyformer.kernels.numba._fastexp import exp_nonpositive
    from tinyformer.kernels.numba._rows import FASTMATH

    @njit(parallel=True, fastmath=FASTMATH)
    def apply(x, y):
        for i in prange(x.size):
            y[i] = exp_nonpositive(x[i])

    return apply


@pytest.mark.parametrize("dtype, ulps", [(np.float32, 3), (np.float64, 8)])
def test_fast_exp_is_accurate_and_exact_at_the_ends(vector_exp, dtype, ulps):
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.random(100_000) * 20, [0.0, -0.0, -1e-30, -np.inf]]).astype(dtype)
    y = np.empty_like(x)
    vector_exp(x, y)
    exact = np.exp(x.astype(np.float64))
    rel = np.abs(y - exact) / exact.clip(np.finfo(dtype).tiny)
    assert rel[np.isfinite(x)].max() < ulps * np.finfo(dtype).eps
    assert y[-1] == 0.0 and y[-4] == 1.0  # exp(-inf) = 0 exactly (masked attention needs it)
    deep = np.array([-1e4, math.log(np.finfo(dtype).tiny) - 1], dtype)
    vector_exp(deep, y[:2])
    assert (y[:2] == 0).all()


@pytest.mark.parametrize("dtype, ulps", [(np.float32, 2), (np.float64, 4)])
def test_floored_fast_exp2_is_accurate_and_never_below_twice_the_smallest_normal(dtype, ulps):
    # The tanh GELU's exp: 2^t with a fitted polynomial in float32, floored rather than flushed
    # to 0 (kernels/numba/_fastexp.py); compiled, and the stand-in NUMBA_DISABLE_JIT runs
    from numba import njit, prange

    from tinyformer.kernels.numba._fastexp import exp2_nonpositive_floored
    from tinyformer.kernels.numba._rows import FASTMATH

    @njit(parallel=True, fastmath=FASTMATH)
    def apply(t, y):
        for i in prange(t.size):
            y[i] = exp2_nonpositive_floored(t[i])

    def stand_in(t, y):
        y[...] = [exp2_nonpositive_floored(v) for v in t]

    rng = np.random.default_rng(1)
    floor = -125 if dtype == np.float32 else -1021
    t = np.concatenate([-rng.random(100_000) * 30, -rng.random(1000) * -floor, [0.0, -0.0]])
    t = t.astype(dtype)
    deep = np.array([floor, floor - 0.5, floor - 1e3, -np.inf], dtype)
    for run in (apply, stand_in):
        y, y_deep = np.empty_like(t), np.empty_like(deep)
        run(t, y)
        run(deep, y_deep)
        exact = 2.0 ** t.astype(np.float64)
        assert (np.abs(y - exact) / exact).max() < ulps * np.finfo(dtype).eps
        assert (y_deep == 2.0**floor).all()  # exactly: the polynomial is 1 at 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_gelu_kernels_hold_at_extreme_inputs(dtype):
    # The kernels compute x s(w), s the logistic sigmoid, with exp(-|w|) floored at 2^-125 or
    # 2^-1021 rather than flushed to 0, and clamp x in the terms it multiplies: without the
    # clamp, x = -1e30 gave -2e-8 and a huge x a backward far from 1. Truth in float64, by a
    # stable sigmoid.
    x = np.array(
        [0.0, -0.0, 1e-30, -1e-30, 0.5, -3.0, -9.0, -12.0, -19.9, -20.0, -25.0, 25.0, -1e4, 1e4,
         -1e13, 1e13, -1e30, 1e30, -3e38, 3e38, np.inf, -np.inf, np.nan],
        dtype,
    )  # fmt: skip
    with registry.prefer("numba"):
        y = registry.call("gelu.forward", x, "tanh")
        gx = registry.call("gelu.backward", np.ones_like(x), x, "tanh")
    with np.errstate(over="ignore", invalid="ignore"):
        v = x.astype(np.float64)
        w = np.sqrt(8 / np.pi) * (v + 0.044715 * v**3)
        e = np.exp(-np.abs(w))
        s = np.where(w >= 0, 1 / (1 + e), e / (1 + e))
        dw = np.sqrt(8 / np.pi) * (1 + 0.134145 * v**2)
        want_y = np.where(s == 0, 0.0, v * s)  # x s(w) -> 0 as x -> -inf
        want_gx = s + np.where(e == 0, 0.0, v * s * (1 - s) * dw)
    finite = np.isfinite(x)
    np.testing.assert_allclose(y[finite], want_y[finite], rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(gx[finite], want_gx[finite], rtol=1e-6, atol=1e-30)
    assert y[-3] == np.inf and abs(y[-2]) < 1e-30 and np.isnan(y[-1])
    assert gx[-3] == 1 and abs(gx[-2]) < 1e-30 and np.isnan(gx[-1])


def test_gelu_kernels_float32_erfc_and_gaussian_are_accurate():
    # The float32 erfc is t exp(-a^2) Q(s) with a fitted polynomial Q (kernels/numba/gelu.py);
    # exp(-a^2) is returned as well, for the backward's Gaussian density.
    from numba import njit, prange

    from tinyformer.kernels.numba._rows import FASTMATH
    from tinyformer.kernels.numba.gelu import erfc_and_gauss

    @njit(parallel=True, fastmath=FASTMATH)
    def apply(z, tail, gauss):
        for i in prange(z.size):
            tail[i], gauss[i] = erfc_and_gauss(z[i])

    z = np.linspace(-9, 9, 180_001).astype(np.float32)
    tail, gauss = np.empty_like(z), np.empty_like(z)
    apply(z, tail, gauss)
    exact = np.array([math.erfc(v) for v in z.astype(np.float64)])
    assert (np.abs(tail - exact) / exact).max() < 5e-6
    exact_gauss = np.exp(-(z.astype(np.float64) ** 2))
    assert (np.abs(gauss - exact_gauss) / np.maximum(exact_gauss, 1e-30)).max() < 5e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_max_matches_numpy_with_infinities_nans_and_signed_zeros(dtype):
    # row_max maps each float to an integer that orders like it (kernels/numba/_rowmax.py)
    from numba import njit

    from tinyformer.kernels.numba._rowmax import row_max, row_max_at

    first_n = njit(lambda x, n: row_max(x, n))
    from_at = njit(lambda x, at, n: row_max_at(x, at, n))  # a row of a flat buffer
    rng = np.random.default_rng(5)
    tiny, huge = np.finfo(dtype).tiny, np.finfo(dtype).max
    for trial in range(400):
        n = int(rng.integers(1, 70))
        x = (rng.standard_normal(n + 3) * 10.0 ** rng.integers(-30, 30)).astype(dtype)
        kind = trial % 8
        if kind == 1:
            x[rng.integers(0, n)] = np.inf
        elif kind == 2:
            x[:] = -np.inf
        elif kind == 3:  # a NaN of either sign, alone among -inf or among numbers
            x[: n if trial % 16 < 8 else 0] = -np.inf
            x[rng.integers(0, n)] = -np.nan if trial % 3 else np.nan
        elif kind == 4:
            x[:] = -np.abs(x)
        elif kind == 5:
            x[:] = 0.0
            x[rng.integers(0, n)] = -0.0
        elif kind == 6:
            x[:n] = rng.choice([tiny, -tiny, huge, -huge], n)
        got, want = first_n(x, n), np.max(x[:n])
        assert (np.isnan(got) and np.isnan(want)) or got == want, (x[:n], got, want)
        # the same row 3 elements into a buffer, between values that would win if read
        padded = np.concatenate([np.full(3, np.inf, dtype), x[:n], np.full(3, np.inf, dtype)])
        for at_n in (from_at, row_max_at):  # compiled, and the stand-in NUMBA_DISABLE_JIT runs
            got = at_n(padded, 3, n)
            assert (np.isnan(got) and np.isnan(want)) or got == want, (x[:n], got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_four_row_maxima_match_numpy_row_by_row(dtype):
    # The attention forward's block of four rows in one loop, each element past a row's n read
    # as -inf (kernels/numba/_rowmax.py): compiled, and the stand-in NUMBA_DISABLE_JIT runs
    from numba import njit

    from tinyformer.kernels.numba._rowmax import four_row_maxima

    jitted = njit(lambda x, step, ns, last: four_row_maxima(x, step, *ns, last))
    stand_in = lambda x, step, ns, last: four_row_maxima(x, step, *ns, last)  # noqa: E731
    rng = np.random.default_rng(6)
    step = 40
    for trial in range(300):
        last = int(rng.integers(1, step + 1))
        ns = tuple(int(n) for n in rng.integers(0, last + 1, 4))
        # values past each row's n are larger than any it sees: reading one is an error
        x = np.full(4 * step, 1e30, dtype)
        for r, n in enumerate(ns):
            x[r * step : r * step + n] = rng.standard_normal(n) * 10.0 ** rng.integers(-5, 5)
            if trial % 5 == 1 and n:
                x[r * step : r * step + n] = -np.inf  # a fully masked row
            if trial % 7 == 2 and n:
                x[r * step + rng.integers(0, n)] = np.nan
        want = [np.max(x[r * step : r * step + n]) if n else -np.inf for r, n in enumerate(ns)]
        for run in (jitted, stand_in):
            got = run(x, step, ns, last)
            for g, w in zip(got, want):
                assert (np.isnan(g) and np.isnan(w)) or g == w, (trial, ns, got, want)


def test_claimed_tasks_are_handed_out_once_each_while_workers_race():
    # Kernels share tasks through `claim` (kernels/numba/_tasks.py); a claim that is not one
    # atomic step hands some numbers to both workers when they race for them, as here, where
    # a task is one store.
    from numba import njit, prange

    from tinyformer.kernels.numba._tasks import claim, new_counter

    @njit(parallel=True)
    def take_all(n, workers, taken_by):
        tasks = new_counter()
        for w in prange(workers):
            t = claim(tasks)
            while t < n:
                taken_by[w, t] += 1
                t = claim(tasks)

    n, workers = 2_000_000, numba.get_num_threads()
    taken_by = np.zeros((workers, n), np.int8)
    take_all(n, workers, taken_by)
    assert np.array_equal(taken_by.sum(axis=0), np.ones(n))
    counter = new_counter()  # the plain-Python stand-in (NUMBA_DISABLE_JIT=1) counts the same
    assert [claim(counter) for _ in range(3)] == [0, 1, 2] and counter[0] == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transposed_copy_moves_every_element_once_and_nothing_else(dtype):
    # Attention's kernels copy K and V transposed through 8 x 8 blocks of vector shuffles
    # (kernels/numba/_transpose.py). Every shape here has full blocks, edge rows, edge columns
    # or both; the source rows are strided (step > cols), as in a fused QKV projection; the
    # scratch starts at -1, so a stray store or a missed element shows.
    from tinyformer.kernels.numba._transpose import copy_transposed

    rng = np.random.default_rng(0)
    for rows, cols, step, start in [(64, 32, 96, 0), (17, 13, 20, 5), (8, 8, 8, 0), (7, 9, 11, 3),
                                    (3, 1, 1, 0), (24, 16, 16, 1), (0, 4, 4, 0)]:  # fmt: skip
        src = rng.standard_normal(start + max(rows, 1) * step).astype(dtype)
        dst_row = rows + 3
        want = np.full(cols * dst_row, -1, dtype)
        rows_of_src = np.lib.stride_tricks.as_strided(
            src[start:], (rows, cols), (step * src.itemsize, src.itemsize)
        )
        want.reshape(cols, dst_row)[:, :rows] = rows_of_src.T
        for copy in (
            copy_transposed,
            copy_transposed.py_func,
        ):  # compiled, and as NUMBA_DISABLE_JIT runs it
            got = np.full_like(want, -1)
            copy(src, start, step, rows, cols, got, dst_row)
            assert np.array_equal(got, want), (copy, rows, cols, step, start)


def _jitted_tile(tile):
    from numba import njit

    @njit
    def run(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row):
        tile(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, out, o_at, o_row)

    return run


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_register_tiles_compute_four_rows_of_a_product_and_write_nothing_else(dtype):
    # Attention's short kernels do every product through 4 x 8, 16 or 32 tiles whose
    # accumulators live in vector registers (kernels/numba/_tile.py, LLVM IR). Here a is read
    # by rows (a_col = 1) and by columns (a_row = 1, as dK = dS^T Q reads dS), the sum starts
    # past 0 (causal dK and dV) or is empty, and the output rows sit inside a larger array
    # filled with -1, so a stray or missing store shows.
    from tinyformer.kernels.numba._tile import tile8, tile16, tile32

    rng = np.random.default_rng(0)
    a = rng.standard_normal(40 * 50).astype(dtype)
    b = rng.standard_normal(40 * 50).astype(dtype)
    for tile, width in ((tile8, 8), (tile16, 16), (tile32, 32)):
        jitted = _jitted_tile(tile)
        for a_row, a_col, t0, t1 in ((50, 1, 0, 37), (1, 50, 3, 40), (50, 1, 5, 5)):
            a_at, b_at, b_row, o_at, o_row = 2, 7, 45, 3, width + 5
            rows = np.arange(4)[:, None] * a_row + np.arange(t0, t1)[None, :] * a_col
            cols = np.arange(t0, t1)[:, None] * b_row + np.arange(width)[None, :]
            want = np.full(4 * o_row + o_at, -1, dtype)
            product = a[a_at + rows].astype(np.float64) @ b[b_at + cols].astype(np.float64)
            want[o_at:].reshape(4, o_row)[:, :width] = product
            for run in (jitted, tile):  # compiled, and the stand-in NUMBA_DISABLE_JIT runs
                got = np.full_like(want, -1)
                run(a, a_at, a_row, a_col, b, b_at, b_row, t0, t1, got, o_at, o_row)
                tol = 1e-5 if dtype == np.float32 else 1e-12
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)
                assert (got[:o_at] == -1).all()
                assert (got[o_at:].reshape(4, o_row)[:, width:] == -1).all()


def test_tiles_of_32_columns_only_where_the_cpu_has_32_vector_registers(monkeypatch):
    # A 4 x 32 tile needs 21 vector registers; on AVX2's 16, LLVM spills accumulators and the
    # attention products ran 7-12% slower than in two tiles of 16.
    import llvmlite.binding
    from numba.core import config

    from tinyformer.kernels.numba._tile import wide_tiles

    monkeypatch.setattr(config, "CPU_NAME", None)
    for features, wide in (("+avx2,+fma,-avx512f", False), ("+avx2,+avx512f,+fma", True)):
        monkeypatch.setattr(config, "CPU_FEATURES", features)
        assert wide_tiles() is wide
    monkeypatch.setattr(config, "CPU_FEATURES", None)
    for host, wide in (({"avx2": True, "avx512f": False}, False), ({"avx512f": True}, True)):
        monkeypatch.setattr(llvmlite.binding, "get_host_cpu_features", lambda host=host: host)
        assert wide_tiles() is wide
    monkeypatch.setattr(config, "CPU_NAME", "generic")  # portable caches: the smaller file
    assert wide_tiles() is False


def test_missing_numba_falls_back_to_the_reference_silently(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "numba" else find_spec(name)
    )
    saved = {p: dict(impls) for p, impls in registry._table.items()}
    for impls in registry._table.values():
        impls.pop("numba", None)
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    registry._cache.clear()
    try:
        x = np.ones((2, 3), np.float32)
        assert registry.implementation("softmax.forward", x).backend == "numpy"
        assert "numba is not installed" in registry.explain("softmax.forward")
    finally:
        registry._table.update(saved)
        registry._cache.clear()


def test_a_broken_kernel_file_is_raised_loudly(tmp_path, monkeypatch):
    import tinyformer.kernels.numba as package

    (tmp_path / "broken.py").write_text("raise RuntimeError('syntax of the future')\n")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.setattr(registry, "_state", {"kernels_loaded": False, "env": None})
    with pytest.raises(RuntimeError, match="syntax of the future"):
        registry.implementation("softmax.forward", np.ones(2))
    monkeypatch.undo()
    registry._cache.clear()


# linear's kernel splits each product's rows over Numba's workers, with BLAS on one thread in
# each: the registry picks it only when BLAS is single-threaded (as `tinyformer train` sets).
def test_linear_kernel_is_chosen_only_with_single_threaded_blas():
    x, w = np.zeros((64, 8), np.float32), np.zeros((5, 8), np.float32)
    registry.choose("linear.forward", x, w, None)  # loads the BLAS Numba calls, to limit it too
    with threadpool_limits(limits=1, user_api="blas"):
        assert registry.choose("linear.forward", x, w, None).backend == "numba"
        assert registry.choose("linear.forward", x[:63], w, None).backend == "numpy"  # small
    with threadpool_limits(limits=2, user_api="blas"):
        assert registry.choose("linear.forward", x, w, None).backend == "numpy"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)])
def test_linear_kernel_matches_reference_over_uneven_row_blocks(dtype, needs):
    rng = np.random.default_rng(len(needs))
    x, w = rng.standard_normal((131, 37)).astype(dtype), rng.standard_normal((19, 37)).astype(dtype)
    b, gy = rng.standard_normal(19).astype(dtype), rng.standard_normal((131, 19)).astype(dtype)
    x_strided = np.repeat(x, 2, axis=1)[:, ::2]  # not contiguous: the kernel copies it
    tol = 1e-4 if dtype == np.float32 else 1e-12
    with threadpool_limits(limits=1, user_api="blas"):
        results = []
        for backend in ("numba", "numpy"):
            with registry.prefer(backend):  # the kernel's rule holds: BLAS on one thread
                assert registry.choose("linear.forward", x_strided, w, b).backend == backend
                y = registry.call("linear.forward", x_strided, w, b)
                grads = registry.call("linear.backward", gy, x_strided, w, *needs)
            results.append((y, *grads))
    for got, want in zip(*results):
        assert (got is None) == (want is None)
        if got is not None:
            assert got.dtype == dtype
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# In a fresh process SciPy's BLAS, the one the kernels call, is not loaded until a kernel needs
# it: the bench's one-thread wrapper must load it first, or it limits only NumPy's BLAS and the
# transposed conv's kernel is timed on its other path.
def test_bench_one_blas_thread_reaches_the_blas_kernels_call_in_a_fresh_process():
    import os
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from benchmarks.kernels import _on_one_blas_thread
from tinyformer.kernels.numba.conv_transpose2d import _stamps_tile
assert "scipy.linalg.cython_blas" not in sys.modules
x, w = np.ones((4, 3, 5, 5), np.float32), np.ones((3, 2, 2, 2), np.float32)
print(_on_one_blas_thread(lambda: _stamps_tile(x, w, (2, 2), (0, 0), (0, 0), (1, 1), 1))())
"""
    env = {**os.environ, "NUMBA_NUM_THREADS": "2"}  # a batch of 4 splits over the workers
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"  # the per-image BLAS products would run


# The bench times kernels that call BLAS from their workers with BLAS on one thread, as training
# runs them, and must give the threads back after each call, even one that raises: the next
# reference timed would run on one thread otherwise.
def test_bench_runs_blas_calling_kernels_on_one_blas_thread_and_restores_it():
    from benchmarks.kernels import _on_one_blas_thread
    from tinyformer.kernels.numba._blas import blas_one_thread

    blas_one_thread()  # loads the BLAS Numba calls, so that the limits below reach it too
    seen = []

    def fails():
        seen.append(blas_one_thread())
        raise RuntimeError("kernel failed")

    with threadpool_limits(limits=2, user_api="blas"):
        run = _on_one_blas_thread(lambda: seen.append(blas_one_thread()) or "result")
        assert run() == "result"
        assert not blas_one_thread()  # given back
        with pytest.raises(RuntimeError, match="kernel failed"):
            _on_one_blas_thread(fails)()
        assert not blas_one_thread()
    assert seen == [True, True]


def test_kernels_compile_once_per_dtype_whatever_the_inputs_layout():
    # Numba compiles a kernel once per argument type, and a type includes the array's layout
    # (C, F or strided) and whether it is read-only; each compile costs seconds. The wrappers
    # hand over contiguous, read-only arrays of the input's dtype, so that a transposed weight,
    # a strided bias, a one-row weight (both C and F contiguous), a float32 weight on float64
    # inputs or a read-only gradient compiles nothing new.
    from tinyformer.kernels.numba import cross_entropy, layer_norm, linear

    rng = np.random.default_rng(0)
    x, target = rng.standard_normal((6, 4)), np.arange(6) % 4
    frozen = np.ones(6)
    frozen.flags.writeable = False
    _, lse = registry.call("cross_entropy.forward", x, target, -100, 0.0)
    calls = {
        linear._forward: [
            ("linear.forward", x, rng.standard_normal((3, 4)), rng.standard_normal(3)),
            ("linear.forward", x, rng.standard_normal((4, 3)).T, rng.standard_normal(6)[::2]),
            ("linear.forward", x, rng.standard_normal((1, 4)), None),
            ("linear.forward", x, rng.standard_normal((4, 1)).T, np.zeros(1)),
        ],
        layer_norm._forward: [
            ("layer_norm.forward", x, np.ones(4), np.zeros(4), 1e-5),
            ("layer_norm.forward", x, np.ones(4, np.float32), np.zeros(8)[::2], 1e-5),
        ],
        cross_entropy._forward: [
            ("cross_entropy.forward", x, target, -100, 0.0),
            ("cross_entropy.forward", x[::-1], target.astype(np.int64)[::-1], -100, 0.0),
        ],
        cross_entropy._backward: [
            ("cross_entropy.backward", np.ones(6), x, target, lse, -100, 0.0),
            ("cross_entropy.backward", frozen, x, target, lse.copy(), -100, 0.0),
        ],
    }
    with registry.prefer("numba", force=True):
        for kernel, (first, *rest) in calls.items():
            registry.call(*first)  # compiles (or loads) float64
            count = len(kernel.signatures)
            for call in rest:
                registry.call(*call)
            assert len(kernel.signatures) == count, f"{first[0]}: {kernel.signatures}"
