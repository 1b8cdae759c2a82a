"""How long Numba's OpenMP workers should spin before they sleep (`GOMP_SPINCOUNT`), alone on
the machine and beside one busy neighbour. Prints a table and writes JSON.

    python -m benchmarks.spin_under_load [--iters 60] [--rounds 2] [--spins 0,1000,10000,100000]

A parallel kernel hands its rows to the pool's workers and waits for all of them. A worker
that spins after its part keeps its core, so the next kernel finds it awake: on an idle machine
that saves a wake-up per kernel. When another process wants the core, the spinning worker holds
it for the spin's length while the worker that still has rows to do waits for a turn, and every
kernel waits a scheduler tick. Each row trains the baby GPT from a plain script (a fresh
process, `GOMP_SPINCOUNT` set, the other settings as tinyformer applies them), once alone and
once beside a process that keeps one core busy (any other work: a second notebook, a test run,
a browser). A cell is the median over rounds of each run's median ms/iter (after its first
fifth).

A number in --spins runs with that spin and `TINYFORMER_THREADS=all` (every kernel on the
whole pool, whatever the neighbour does); "default" runs with tinyformer's own settings (on
Linux a long spin, and the kernels on the cores other processes leave idle: tinyformer/cores.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.inprocess_vs_cli import ROOT, SCRIPT, _clean_env, _cpu_model

BUSY = "while True: pass"
DEFAULT = "default"  # tinyformer's own settings


def run_once(spin: str, iters: int, neighbour: bool) -> float:
    """One fresh training process with GOMP_SPINCOUNT=`spin`; its median ms/iter."""
    busy = subprocess.Popen([sys.executable, "-c", BUSY]) if neighbour else None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-spin-") as out:
            extra = {} if spin == DEFAULT else {"GOMP_SPINCOUNT": spin, "TINYFORMER_THREADS": "all"}
            env = _clean_env(**extra)
            cmd = [sys.executable, "-c", SCRIPT.format(iters=iters), out]
            subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            ms = json.loads((Path(out) / "log.json").read_text())["ms"]
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    return statistics.median(ms[len(ms) // 5 :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=60, help="iterations per run (60)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each cell (2)")
    parser.add_argument("--spins", default="0,1000,10000,100000,default",
                        help="GOMP_SPINCOUNT values, or 'default'")  # fmt: skip
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results/spin_under_load.json")
    args = parser.parse_args()
    spins = [s.strip() for s in args.spins.split(",") if s.strip()]
    bad = [s for s in spins if not s.isdigit() and s != DEFAULT]
    if bad or not spins:
        parser.error(
            f"--spins must be non-negative integers or 'default', separated by commas, got {bad}"
        )
    for name, value in (("--iters", args.iters), ("--rounds", args.rounds)):
        if value < 5 if name == "--iters" else value < 1:
            parser.error(f"{name} is too small: {value}")
    from tinyformer.bench import machine, print_table
    from tinyformer.fileio import save_json

    runs: dict[tuple[str, bool], list[float]] = {(s, n): [] for s in spins for n in (False, True)}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for spin, neighbour in order:
            runs[spin, neighbour].append(run_once(spin, args.iters, neighbour))
            loads.append(os.getloadavg()[0])
            where = "beside a busy core" if neighbour else "alone"
            print(f"round {r + 1}: spin {spin}, {where}: {runs[spin, neighbour][-1]:.1f} ms/iter")
    rows = [
        {
            "GOMP_SPINCOUNT": spin,
            "alone": f"{statistics.median(runs[spin, False]):.1f}",
            "beside a busy core": f"{statistics.median(runs[spin, True]):.1f}",
        }
        for spin in spins
    ]
    cpu = _cpu_model()
    title = (f"baby GPT from a script, median ms/iter over {args.rounds} rounds of {args.iters} "
             f"iterations ({cpu}, {os.cpu_count()} CPUs)")  # fmt: skip
    print_table(title, rows, ["GOMP_SPINCOUNT", "alone", "beside a busy core"])
    save_json(args.json, {"machine": {**machine(), "cpu": cpu}, "iters": args.iters,
                          "load_average": loads, "rows": rows,
                          "runs": {f"{s}/{'busy' if n else 'alone'}": v
                                   for (s, n), v in runs.items()}})  # fmt: skip
    print(f"\n{args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
