"""Where each parallel Numba kernel runs faster on the calling thread alone than on the pool:
measures it, prints a table, and writes the thresholds the registry reads
(`tinyformer/thread_table.py`) and JSON.

    python -m benchmarks.one_thread [--passes 3] [--repeats 60] [--gap-us 30] [--dry-run]

Why: a parallel kernel wakes the pool's workers and waits for the last of them. On a 2-core
virtual machine that start costs tens of microseconds, more than a small call's work, so small
models (a bigram's AdamW step on a 27 x 27 table, a cross-entropy over 32 x 27 logits) ran many
times slower than one thread would. The registry runs a kernel call on one thread when its work
(the elements of its first array) is below its primitive's threshold (registry.py, "Threads").

How: each primitive's calls are built at a ladder of model shapes, from a 16-wide model on one
sequence of 8 tokens to twice the baby GPT (`benchmarks/kernels.py`'s cases, plus linear's).
At each rung the kernel runs on the pool and on one thread, in alternating batches; before each
timed call the process busy-waits `--gap-us` (the Python of the ops between two kernels of a
step), so that the pool's workers have stopped spinning, as they have in a training step. Each
side's figure is its fastest call over `--passes` passes over the ladder: what it does when the
machine gives it the cores it asks for. Medians are kept beside them, but on a shared machine
they say how busy its neighbours were (a pool of two threads waits for the slower core), which
would move the thresholds with the load of the minute. A primitive's threshold is the rung's
work that loses least over the ladder (`thresholds`); beyond the ladder, the pool.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.inprocess_vs_cli import _cpu_model
from benchmarks.kernels import _cases
from tinyformer import registry, runtime

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tinyformer" / "thread_table.py"
# (B, T, C, nh, V): batch, context, width, heads, vocabulary; the baby GPT is (12, 64, 128, 4, 65)
LADDER = [
    (1, 8, 16, 2, 27), (2, 8, 32, 2, 27), (4, 8, 32, 2, 27), (8, 8, 32, 2, 27),
    (8, 16, 64, 4, 27), (16, 16, 64, 4, 27), (32, 16, 64, 4, 65), (12, 64, 128, 4, 65),
    (24, 64, 128, 4, 65),
]  # fmt: skip
# Primitives whose kernel runs once per array of a list, as the one-array primitive does.
SAME_AS = {"adamw.step_many": "adamw.step"}


def _linear_cases(s: dict[str, int]) -> list[tuple[str, tuple]]:
    rng = np.random.default_rng(0)
    rows, c = s["B"] * s["T"], s["C"]
    x, w, b = (
        rng.standard_normal(shape).astype(np.float32) for shape in ((rows, c), (4 * c, c), (4 * c,))
    )
    gy = rng.standard_normal((rows, 4 * c)).astype(np.float32)
    return [("linear.forward", (x, w, b)), ("linear.backward", (gy, x, w, True, True, True))]


def _calls(shape: tuple[int, ...]) -> list[tuple[str, Callable[..., Any], tuple, dict]]:
    """(primitive, its numba kernel, args, kwargs) at one rung."""
    s = dict(zip("B T C nh V".split(), shape))
    s["layers"] = 1
    calls = [(c.primitive.split("[")[0], c.args, c.kwargs) for c in _cases(s)]
    calls += [(name, args, {}) for name, args in _linear_cases(s)]
    out = []
    for name, args, kwargs in calls:
        impl = registry._table.get(name, {}).get("numba")
        if impl is None or name == "embedding.backward":  # embedding's kernel is serial
            continue
        out.append((name, impl.fn, args, kwargs))
    return out


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def time_pool_and_one(
    fn: Callable[..., Any], args: tuple, kwargs: dict, repeats: int, gap: float
) -> dict[str, float]:
    """Seconds of a call on the pool and on one thread, alternating batches of 5: the fastest
    call of each side and the median."""
    times: dict[bool, list[float]] = {False: [], True: []}
    for one in (False, True):  # warm-up: compiles, loads
        runtime.on_one_thread(fn, *args, **kwargs) if one else fn(*args, **kwargs)
    for _ in range(-(-repeats // 5)):
        for one in (False, True):
            for _ in range(5):
                _spin(gap)
                start = time.perf_counter()
                runtime.on_one_thread(fn, *args, **kwargs) if one else fn(*args, **kwargs)
                times[one].append(time.perf_counter() - start)
    return {
        "pool_us": 1e6 * min(times[False]), "one_us": 1e6 * min(times[True]),
        "pool_median_us": 1e6 * statistics.median(times[False]),
        "one_median_us": 1e6 * statistics.median(times[True]),
    }  # fmt: skip


def thresholds(rows: list[dict]) -> dict[str, int]:
    """Per primitive: the work below which one thread runs, chosen to lose the least. A call
    sent to the slower side loses log(slower / faster); the threshold is the rung's work (or
    the largest plus one) that minimises the sum of those losses over the rungs, the smallest on
    a tie. Why not "the first rung from which the pool always wins": on a shared machine one
    noisy rung at the top would send every size to one thread."""
    found: dict[str, int] = {}
    for name in dict.fromkeys(r["primitive"] for r in rows):
        mine = [r for r in rows if r["primitive"] == name]
        candidates = sorted({r["work"] for r in mine} | {max(r["work"] for r in mine) + 1})

        def loss(below: int, mine: list[dict] = mine) -> float:
            return sum(
                max(0.0, math.log(r["one_us"] / r["pool_us"]))
                if r["work"] < below
                else max(0.0, math.log(r["pool_us"] / r["one_us"]))
                for r in mine
            )

        found[name] = min(candidates, key=lambda c: (loss(c), c))
    for name, same in SAME_AS.items():
        if same in found:
            found[name] = found[same]
    return dict(sorted(found.items()))


def write_table(path: Path, below: dict[str, int], measured: str) -> None:
    lines = [
        '"""Where a parallel Numba kernel runs faster on one thread than on the pool (registry.py,',
        '"Threads"). Written by `python -m benchmarks.one_thread`; measured, not chosen: rerun it',
        "on another machine rather than edit the numbers.",
        "",
        "ONE_THREAD_BELOW: primitive -> work (elements of its first array) below which one",
        "thread wins.",
        '"""',
        "",
        f"MEASURED = {json.dumps(measured)}",
        "ONE_THREAD_BELOW: dict[str, int] = {",
        *(f"    {json.dumps(name)}: {n}," for name, n in below.items()),
        "}",
        "",
    ]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines))
    tmp.replace(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=60, help="timed calls per side per rung")
    parser.add_argument("--passes", type=int, default=3, help="passes over the ladder (3)")
    parser.add_argument("--gap-us", type=float, default=30.0, help="busy wait before each call")
    parser.add_argument("--dry-run", action="store_true", help="print; write no table")
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results/one_thread.json")
    args = parser.parse_args()
    from tinyformer.bench import machine, print_table
    from tinyformer.fileio import save_json

    registry.primitives()  # loads the kernels and applies the process settings
    found: dict[tuple, dict] = {}  # (rung, case) -> its row, the fastest over the passes
    loads = [os.getloadavg()[0]]
    for p in range(args.passes):
        for shape in LADDER:
            for i, (name, fn, call_args, kwargs) in enumerate(_calls(shape)):
                us = time_pool_and_one(fn, call_args, kwargs, args.repeats, args.gap_us * 1e-6)
                row = found.setdefault((shape, i), {
                    "primitive": name, "shape": "x".join(map(str, shape)),
                    "work": registry.work(call_args[0]), "passes": [],
                })  # fmt: skip
                row["passes"].append({k: round(v, 1) for k, v in us.items()})
        loads.append(os.getloadavg()[0])
        print(f"pass {p + 1} done (load average {loads[-1]:.1f})", flush=True)
    rows = []
    for row in found.values():
        passes = row.pop("passes")
        for key in ("pool_us", "one_us"):
            row[key] = min(q[key] for q in passes)
        for key in ("pool_median_us", "one_median_us"):
            row[key] = statistics.median(q[key] for q in passes)
        row["one/pool"] = round(row["one_us"] / row["pool_us"], 2)
        rows.append(row)
    rows.sort(key=lambda r: (r["primitive"], r["work"]))
    cpu = _cpu_model()
    title = (f"pool against one thread, us per call: fastest and median ({cpu}, gap "
             f"{args.gap_us:g} us)")  # fmt: skip
    print_table(title, rows, ["primitive", "shape", "work", "pool_us", "one_us", "one/pool",
                              "pool_median_us", "one_median_us"])  # fmt: skip
    below = thresholds(rows)
    print_table("one thread below", [{"primitive": k, "work": v} for k, v in below.items()],
                ["primitive", "work"])  # fmt: skip
    measured = (f"{time.strftime('%Y-%m-%d')}, {cpu}, {machine()['cpus']} CPUs, load average "
                f"{loads[0]:.1f} to {loads[-1]:.1f}")  # fmt: skip
    if loads[-1] > machine()["cpus"]:  # more runnable work than cores: the pool is starved
        print(f"\nwarning: load average {loads[-1]:.1f} on {machine()['cpus']} CPUs; the pool "
              "loses more calls than on a quiet machine: rerun when it is quiet")  # fmt: skip
    if not args.dry_run:
        write_table(TABLE, below, measured)
        print(f"\n{TABLE}")
    save_json(args.json, {"machine": {**machine(), "cpu": cpu}, "settings": runtime.settings(),
                          "gap_us": args.gap_us, "load_average": loads, "rows": rows,
                          "one_thread_below": below})  # fmt: skip
    print(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
