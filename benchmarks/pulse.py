"""A pulse of the machine: how fast one core, and all the cores together, run a fixed piece of
arithmetic, taken before and after the tables.

Why: on a shared virtual machine (the one these benchmarks are reported from) the cores slow
down for seconds at a time as their neighbours load the host, sometimes one core, sometimes
both, and a kernel timed during such a spell reads up to 2x slower. The pulse tells a quiet run
from a disturbed one: all cores together should do `cores` times the work of one in the same
time ("balance" 1.0); a slow spell lowers both rates, a lopsided one the balance.

It also times a parallel region with no work, right after another and after the other cores
sat idle for IDLE seconds. On that machine the second is 20-50 times the first (~3 against
60-150 microseconds): an idle virtual core is handed back to the host and must be woken. The
kernel tables time each kernel right after its reference, so every Numba kernel there starts
with idle workers; docs/kernels.md, "A woken core starts late and cold", says what it costs.

`gemm_rate` is the other yardstick: how fast this process's BLAS multiplies two large float32
matrices, as close to the machine's peak as a library gets. A kernel's work divided by it is the
least time any implementation could take, so it bounds the speedup a row can show (the tables'
"ceiling" column).
"""

from __future__ import annotations

import functools
import statistics
import time
from typing import Any

import numpy as np

from tinyformer import registry

LANES = 64  # independent multiply-adds per pass: wide enough to fill the vector units
PASSES = 20_000  # per worker and call: about 1.4 ms of arithmetic on one core here
IDLE = 0.005  # seconds the other cores sit idle before the timed region (the main one busy)


@functools.cache  # one dispatcher for the process (its code comes from Numba's cache)
def _kernel():
    from numba import njit, prange

    from tinyformer.kernels.numba._rows import FASTMATH

    @njit(parallel=True, fastmath=FASTMATH, cache=True)
    def spin(workers, passes, start, scale, shift, out):
        """Each worker: `passes` rounds of a = a * scale + shift over LANES floats from `start`.
        Every value comes in as an argument, so that the compiler cannot fold the rounds."""
        for w in prange(workers):
            a = start.copy()
            for _ in range(passes):
                for j in range(LANES):
                    a[j] = a[j] * scale + shift
            out[w] = a.sum()  # used, so that the loop is not optimised away

    return spin


def pulse(repeats: int = 5) -> dict[str, Any]:
    """GFLOP/s of one core and of all Numba's cores on the fixed arithmetic (2 flops per
    multiply-add, median of `repeats`), and their balance: all / (cores x one), 1.0 when every
    core runs as fast as the first. {} without numba."""
    try:
        import numba
    except ImportError:
        return {}
    # The registry sets OpenMP's spin count before libgomp starts, at its first dispatch; a
    # parallel loop run before that starts libgomp with the default, whose spinning workers
    # then slow every BLAS product of the process (attention at T = 1024, one head: 14-20 ms
    # against 9.5 ms; docs/kernels.md, "OpenMP spinning starves BLAS"). So: registry first.
    registry.primitives()
    spin, cores = _kernel(), numba.get_num_threads()
    out = np.zeros(cores, np.float32)
    lanes = np.linspace(0, 1, LANES, dtype=np.float32)
    args = (lanes, np.float32(0.999), np.float32(0.0005), out)
    spin(cores, 10, *args)  # compile (or load from the cache) outside the timing
    rates = {}
    for workers in (1, cores):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            spin(workers, PASSES, *args)
            times.append(time.perf_counter() - t0)
        rates[workers] = 2 * LANES * PASSES * workers / statistics.median(times) / 1e9
    warm, woken = [], []
    for _ in range(4 * repeats):
        spin(cores, 0, *args)  # the workers are awake and spinning after this
        t0 = time.perf_counter()
        spin(cores, 0, *args)
        warm.append(time.perf_counter() - t0)
        end = time.perf_counter() + IDLE
        while time.perf_counter() < end:  # this core busy (as a reference's NumPy), the others idle
            pass
        t0 = time.perf_counter()
        spin(cores, 0, *args)
        woken.append(time.perf_counter() - t0)
    return {
        "cores": cores,
        "one_core_GFLOPs": rates[1],
        "all_cores_GFLOPs": rates[cores],
        "balance": rates[cores] / (cores * rates[1]),
        "region_us": statistics.median(warm) * 1e6,
        "region_after_idle_us": statistics.median(woken) * 1e6,
    }


def gemm_rate(size: int = 1024, repeats: int = 5) -> float:
    """GFLOP/s of a float32 (size x size) @ (size x size) product on this process's BLAS
    threads (all the cores, in the bench), the best of `repeats` after one warm-up: the rate a
    tuned library reaches on a product large enough to keep every core busy."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    a @ b  # warm-up: BLAS starts its threads
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e9


def describe(result: dict[str, Any]) -> str:
    if not result:
        return "no numba: no pulse"
    return (
        f"one core {result['one_core_GFLOPs']:.1f} GFLOP/s, {result['cores']} cores "
        f"{result['all_cores_GFLOPs']:.1f} GFLOP/s (balance {result['balance']:.2f}); an empty "
        f"parallel region {result['region_us']:.0f} us, {result['region_after_idle_us']:.0f} us "
        f"after {IDLE * 1e3:.0f} ms idle"
    )
