"""Kernel benchmarks: every primitive, NumPy reference vs each kernel backend, at model shapes.

For each primitive the table gives the backend that default dispatch runs at that shape
("default": a kernel may declare a size below which the reference runs), the median time of the
reference and of the kernel (forced with `prefer`), the speedup, and the kernel's throughput:
GB/s for memory-bound primitives (bytes read and written once, the least any implementation must
move) or GFLOP/s for attention (2 flops per multiply-add; causal attention counts only the
unmasked half). Rows with a flop count also get a "ceiling": the speedup a kernel would show if
it did those flops at `gemm_rate` (a large float32 BLAS product on all the cores), which no
kernel can beat; a row whose ceiling is near or below a target cannot meet it on this machine,
however its kernel is written. With torch installed, a column
shows PyTorch CPU on the same inputs (forward primitives only; torch's backward runs through its
autograd and is not comparable primitive by primitive). A kernel that calls BLAS from each of
its workers (the transposed conv's) is timed with BLAS on one thread, as training runs it; its
reference keeps BLAS's two threads (`Case.blas_one_thread`).

Attention memory: peak memory allocated during attention forward + backward (tracemalloc sees
NumPy's allocations; the Numba kernels allocate nothing themselves, every buffer is a NumPy array
made by their Python wrapper), at growing T, one head of size 64.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import operator
import statistics
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyformer import registry
from tinyformer.bench import interleaved_median_times, median_time


@dataclass
class Case:
    primitive: str
    label: str
    args: tuple
    kwargs: dict
    bytes: int = 0  # minimum bytes moved (for GB/s)
    flops: int = 0  # for GFLOP/s (attention)
    torch: Callable[[Any], Any] | None = None  # forward: lambda torch -> thunk
    # The kernels call BLAS from each of Numba's workers, so they run, as in training, with
    # BLAS on one thread (the reference keeps both); `blas_one_thread` times them that way.
    blas_one_thread: bool = False


def _torch(path: str, *args: Any, **kwargs: Any) -> Callable[[Any], Callable[[], Any]]:
    """The PyTorch function at `path` (e.g. "nn.functional.gelu") on the same arrays, as a
    `torch -> thunk` factory, so torch is imported only when it is installed."""

    def make(torch: Any) -> Callable[[], Any]:
        fn = operator.attrgetter(path)(torch)
        tensors = [torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
        return functools.partial(fn, *tensors, **kwargs)

    return make


def _cases(s: dict[str, int], dtype=np.float32) -> list[Case]:
    rng = np.random.default_rng(0)
    B, T, C, nh, V = s["B"], s["T"], s["C"], s["nh"], s["V"]
    hs, rows = C // nh, B * T

    def f(*shape):
        return rng.standard_normal(shape).astype(dtype)

    size = np.dtype(dtype).itemsize
    scores, logits, x, h = f(B, nh, T, T), f(rows, V), f(rows, C), f(rows, 4 * C)
    target = rng.integers(0, V, rows)
    w, b = f(C), f(C)
    q, k, v, gy_att = f(B, nh, T, hs), f(B, nh, T, hs), f(B, nh, T, hs), f(B, nh, T, hs)
    scale = 1 / math.sqrt(hs)
    with registry.prefer(registry.REFERENCE):
        y_sm = registry.call("softmax.forward", scores)
        y_lsm = registry.call("log_softmax.forward", logits)
        _, lse_ce = registry.call("cross_entropy.forward", logits, target, -100, 0.1)
        _, mu, rstd = registry.call("layer_norm.forward", x, w, b, 1e-5)
        y_att, lse_att = registry.call("attention.forward", q, k, v, None, True, scale)
        _, keep = registry.call("dropout.forward", h, 0.1, 1234)
    n_params = 12 * C * C * s.get("layers", 4) + V * C + T * C
    p, g, m1, m2 = f(n_params), f(n_params), np.zeros(n_params, dtype), np.ones(n_params, dtype)
    att_flops = 4 * B * nh * T * (T + 1) // 2 * hs  # causal: T(T+1)/2 pairs, 2 products each
    sh = {
        "scores": f"({B},{nh},{T},{T})",
        "logits": f"({rows},{V})",
        "x": f"({rows},{C})",
        "h": f"({rows},{4 * C})",
        "qkv": f"({B},{nh},{T},{hs}) causal",
    }
    return [
        Case("softmax.forward", sh["scores"], (scores,), {}, 2 * scores.nbytes,
             torch=_torch("softmax", scores, -1)),
        Case("softmax.backward", sh["scores"], (scores, y_sm), {}, 3 * scores.nbytes),
        Case("log_softmax.forward", sh["logits"], (logits,), {}, 2 * logits.nbytes,
             torch=_torch("log_softmax", logits, -1)),
        Case("log_softmax.backward", sh["logits"], (logits, y_lsm), {}, 3 * logits.nbytes),
        Case("cross_entropy.forward", sh["logits"], (logits, target, -100, 0.1), {},
             logits.nbytes + rows * 8,
             torch=_torch("nn.functional.cross_entropy", logits, target, reduction="none",
                          label_smoothing=0.1)),
        Case("cross_entropy.backward", sh["logits"],
             (np.ones(rows, dtype), logits, target, lse_ce, -100, 0.1), {}, 2 * logits.nbytes),
        Case("layer_norm.forward", sh["x"], (x, w, b, 1e-5), {}, 2 * x.nbytes,
             torch=_torch("nn.functional.layer_norm", x, (C,), w, b)),
        Case("layer_norm.backward", sh["x"], (x, x, w, mu, rstd), {}, 3 * x.nbytes),
        Case("gelu.forward", sh["h"], (h, "none"), {}, 2 * h.nbytes,
             torch=_torch("nn.functional.gelu", h)),
        Case("gelu.backward", sh["h"], (h, h, "none"), {}, 3 * h.nbytes),
        Case("gelu.forward[tanh]", sh["h"], (h, "tanh"), {}, 2 * h.nbytes,
             torch=_torch("nn.functional.gelu", h, approximate="tanh")),
        Case("gelu.backward[tanh]", sh["h"], (h, h, "tanh"), {}, 3 * h.nbytes),
        Case("embedding.backward", f"({rows},{C}) into ({V},{C})", (x, target, V, None), {},
             x.nbytes + V * C * size),
        Case("attention.forward", sh["qkv"], (q, k, v, None, True, scale), {}, flops=att_flops,
             torch=_torch("nn.functional.scaled_dot_product_attention", q, k, v, is_causal=True)),
        Case("attention.backward", sh["qkv"],
             (gy_att, q, k, v, y_att, lse_att, None, True, scale), {}, flops=2 * att_flops),
        Case("dropout.forward", sh["h"], (h, 0.1, 1234), {}, 2 * h.nbytes + h.size),
        Case("dropout.backward", sh["h"], (h, keep, 0.1), {}, 2 * h.nbytes + h.size),
        Case("adamw.step", f"({n_params},) params", (p, g, m1, m2),
             {"lr": 1e-3, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1,
              "step": 10}, 7 * p.nbytes),
    ]  # fmt: skip


def _primitive_name(case: Case) -> str:
    return case.primitive.split("[")[0]


def _on_one_blas_thread(fn: Callable[[], Any]) -> Callable[[], Any]:
    """`fn` run with every BLAS library on one thread, as `tinyformer train` runs it, and the
    threads given back after each call (~4 µs, counted in the kernel's time)."""
    from tinyformer.kernels.numba._blas import blas_libraries

    libraries = blas_libraries()  # SciPy's, which the kernels call, among them

    def run() -> Any:
        before = [lib.get_num_threads() for lib in libraries]
        for lib in libraries:
            lib.set_num_threads(1)
        try:
            return fn()
        finally:
            for lib, threads in zip(libraries, before):
                lib.set_num_threads(threads)

    return run


def kernel_timings(
    shapes: dict[str, int], repeats: int = 15, gemm_gflops: float | None = None
) -> list[dict[str, Any]]:
    return time_cases(_cases(shapes), repeats, gemm_gflops)


def time_cases(
    cases: list[Case], repeats: int = 15, gemm_gflops: float | None = None
) -> list[dict[str, Any]]:
    """One row per case: reference time, every other backend's time and speedup, GB/s or
    GFLOP/s, and PyTorch's time where the case has a PyTorch twin and torch is installed. Given
    the machine's GEMM rate (`pulse.gemm_rate`), rows with a flop count also get their
    "ceiling": reference time / (flops / rate), the most speedup the flops allow."""
    rows = []
    for case in cases:
        name = _primitive_name(case)

        def forced(backend: str, case: Case = case, name: str = name) -> Callable[[], Any]:
            with registry.prefer(backend, force=True):  # what runs, called directly
                impl = registry.choose(name, *case.args, **case.kwargs)
            fn = functools.partial(impl.fn, *case.args, **case.kwargs)
            if case.blas_one_thread and backend != registry.REFERENCE:
                return _on_one_blas_thread(fn)
            return fn

        times = interleaved_median_times({b: forced(b) for b in registry.backends(name)}, repeats)
        row = {"primitive": case.primitive, "shape": case.label}
        row["default"] = registry.choose(name, *case.args, **case.kwargs).backend
        row["numpy_ms"] = times[registry.REFERENCE] * 1e3
        for backend, t in times.items():
            if backend == registry.REFERENCE:
                continue
            row[f"{backend}_ms"] = t * 1e3
            row["speedup"] = row["numpy_ms"] / row[f"{backend}_ms"]
            if case.flops:
                row["GFLOP/s"] = case.flops / t / 1e9
            else:
                row["GB/s"] = case.bytes / t / 1e9
        if case.flops and gemm_gflops:
            row["ceiling"] = times[registry.REFERENCE] * gemm_gflops * 1e9 / case.flops
        rows.append(row)
    # PyTorch last, in its own pass: its OpenMP workers spin after each call and would slow
    # whatever is timed next.
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(2)  # the machines this project targets have 2 cores
        with torch.no_grad():
            for case, row in zip(cases, rows):
                if case.torch is not None:
                    row["torch_ms"] = median_time(case.torch(torch), repeats) * 1e3
    return rows


def combine_runs(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of several runs of the same cases as one table: each number the median over the
    runs (a run's speedup taken within that run, then the median of those), and the lowest and
    highest speedup any run read.

    Why: on a shared virtual machine a spell of seconds, when the host gives a core to a
    neighbour, slows every kernel timed in it, and a single run's row can read half its usual
    speedup (docs/kernels.md). Runs seconds apart fall into different spells; their median says
    what the kernel usually does, and "lowest" keeps the spells in view instead of hiding them."""
    if len(runs) == 1:
        return runs[0]
    rows = []
    for same in zip(*runs, strict=True):  # the same case, once per run
        row = dict(same[0])
        for key, value in same[0].items():
            if isinstance(value, float):
                row[key] = statistics.median(r[key] for r in same)
        if "speedup" in row:
            row["lowest"] = min(r["speedup"] for r in same)
            row["highest"] = max(r["speedup"] for r in same)
        rows.append(row)
    return rows


def geometric_mean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def _attention_step(q, k, v, gy, scale) -> None:
    y, lse = registry.call("attention.forward", q, k, v, None, True, scale)
    registry.call("attention.backward", gy, q, k, v, y, lse, None, True, scale)


def attention_memory(lengths: tuple[int, ...] = (256, 1024, 4096), head: int = 64):
    """Per backend: peak bytes allocated by attention forward + backward, and its median time
    (the backends timed in alternating batches, as the kernel tables are), for one causal head
    of size `head` at growing T."""
    rows = []
    rng = np.random.default_rng(0)
    for t in lengths:
        q, k, v, gy = (rng.standard_normal((1, t, head)).astype(np.float32) for _ in range(4))
        scale = 1 / math.sqrt(head)
        row: dict[str, Any] = {"T": t}
        row["default"] = registry.choose("attention.forward", q, k, v, None, True, scale).backend
        steps = {
            backend: _forced_step(backend, q, k, v, gy, scale)
            for backend in registry.backends("attention.forward")
        }
        times = interleaved_median_times(steps, repeats=6, rounds=3, warmup=1)
        for backend, step in steps.items():
            row[f"{backend}_ms"] = times[backend] * 1e3
            tracemalloc.start()
            step()
            row[f"{backend}_MiB"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        rows.append(row)
    return rows


def _forced_step(backend: str, *args: Any) -> Callable[[], None]:
    """`_attention_step(*args)` with the registry forced to `backend`."""

    def step() -> None:
        with registry.prefer(backend, force=True):
            _attention_step(*args)

    return step
