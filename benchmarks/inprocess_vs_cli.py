"""The baby GPT trained from a plain script (`train_gpt(TrainGPTConfig(...))`, as tutorial 06
does) against the same run through `tinyformer train gpt`. Prints a table and writes JSON.

    python benchmarks/inprocess_vs_cli.py [--iters 150] [--rounds 3]

The command restarts itself with the start-up settings (`tinyformer.runtime.RUNTIME_ENV`); a
script runs with whatever its Python started with, and gets the rest of the settings at its
first op (`runtime.apply_settings`). The third row is a script with `TINYFORMER_THREADS=keep`:
BLAS on its own threads beside Numba's, as every script ran before the settings moved in-process.
`--workqueue` adds a script on Numba's workqueue threading layer (`NUMBA_THREADING_LAYER`),
whose workers do not spin, so `GOMP_SPINCOUNT` means nothing there.
Every run is a fresh process, its environment cleared of the settings; the runs take turns,
round after round, and each row is the median over rounds of each run's median ms/iter (after
its first fifth of iterations), so that a busy spell on a shared machine hits all rows alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import json, sys
import numpy as np
from tinyformer.train import TrainGPTConfig, train_gpt
log = train_gpt(TrainGPTConfig(iters={iters}, eval_interval={iters}, eval_iters=1,
                               out_dir=sys.argv[1], sample_tokens=0, progress=False))
"""


EXTRA_ENV = {
    "script, keep": {"TINYFORMER_THREADS": "keep"},
    "script, workqueue": {"NUMBA_THREADING_LAYER": "workqueue"},
}


def _clean_env(**extra: str) -> dict[str, str]:
    from tinyformer.runtime import BLAS_THREAD_VARS, MALLOC_VARS, RUNTIME_ENV, THREADS_VAR

    drop = {*BLAS_THREAD_VARS, *MALLOC_VARS, *RUNTIME_ENV, THREADS_VAR, "GOMP_SPINCOUNT"}
    drop |= {"TINYFORMER_RESTARTED", "NUMBA_THREADING_LAYER"}
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **extra}


def run_once(kind: str, iters: int) -> float:
    """One fresh process of `kind`; its median ms/iter after the first fifth."""
    with tempfile.TemporaryDirectory(prefix="bench-gpt-") as out:
        if kind == "cli":
            cmd = [sys.executable, "-m", "tinyformer.cli", "train", "gpt", "--iters", str(iters),
                   "--eval-interval", str(iters), "--eval-iters", "1", "--no-progress",
                   "--sample-tokens", "0", "--out-dir", out]  # fmt: skip
            env = _clean_env()
        else:
            cmd = [sys.executable, "-c", SCRIPT.format(iters=iters), out]
            env = _clean_env(**EXTRA_ENV.get(kind, {}))
        subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        ms = json.loads((Path(out) / "log.json").read_text())["ms"]
    return statistics.median(ms[len(ms) // 5 :])


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return platform.processor()
    return next((line.split(":", 1)[1].strip() for line in out.splitlines()
                 if line.startswith("Model name")), platform.processor())  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=150, help="iterations per run (150)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind (3)")
    parser.add_argument("--keep", action="store_true", help="add the TINYFORMER_THREADS=keep row")
    parser.add_argument("--workqueue", action="store_true", help="add a workqueue-layer row")
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results/inprocess_vs_cli.json")
    args = parser.parse_args()
    for name, value in (("--iters", args.iters), ("--rounds", args.rounds)):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    from tinyformer.bench import machine, print_table
    from tinyformer.fileio import save_json

    kinds = ["cli", "script", *(["script, keep"] if args.keep else [])]
    kinds += ["script, workqueue"] if args.workqueue else []
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for kind in kinds if r % 2 == 0 else kinds[::-1]:  # neither kind always goes first
            runs[kind].append(run_once(kind, args.iters))
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1}: {kind}: {runs[kind][-1]:.1f} ms/iter", flush=True)
    cli = statistics.median(runs["cli"])
    rows = [{"run": k, "ms/iter": f"{statistics.median(v):.1f}",
             "x cli": f"{statistics.median(v) / cli:.2f}",
             "each round": ", ".join(f"{t:.1f}" for t in v)} for k, v in runs.items()]  # fmt: skip
    cpu = _cpu_model()
    title = (f"baby GPT, median ms/iter over {args.rounds} rounds of {args.iters} iterations "
             f"({cpu}, {os.cpu_count()} CPUs, "
             f"load average {min(loads):.1f}-{max(loads):.1f})")  # fmt: skip
    print_table(title, rows, ["run", "ms/iter", "x cli", "each round"])
    save_json(args.json, {"machine": {**machine(), "cpu": cpu}, "iters": args.iters,
                          "load_average": loads, "rows": rows})  # fmt: skip
    print(f"\n{args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
