"""linear at the baby GPT's shapes: the Numba kernel (rows split over Numba's workers, BLAS on
one thread in each) against the NumPy reference with BLAS on one thread and on two, and the same
three products in PyTorch (MKL, 2 threads) when it is installed. Prints a table and writes JSON.

    python benchmarks/linear_one_pool.py

The kernel exists for the training commands' one-pool settings (kernels/numba/linear.py): it
must not lose to the reference on two cores even in isolation, where BLAS's own threads pay no
hand-over to Numba's. Each configuration runs in its own process (BLAS reads its thread count
at start-up); forward and backward are timed with all three gradients.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ROWS = 12 * 64  # batch x context
SHAPES = [(128, 384), (128, 128), (128, 512), (512, 128)]  # (in, out): qkv, proj, fc, proj
RUNS = {  # label: (backend, BLAS threads)
    "numba kernel, BLAS 1 thread": ("numba", "1"),
    "reference, BLAS 1 thread": ("numpy", "1"),
    "reference, BLAS 2 threads": ("numpy", "2"),
    "PyTorch (MKL), 2 threads": ("torch", "2"),
}


def median_us(fn) -> float:
    from tinyformer.bench import median_time

    return median_time(fn, repeats=200, warmup=20) * 1e6


def torch_products(x, w, b, gy):
    """The same products in PyTorch: x W^T + b; gy W, gy^T x and the column sums of gy."""
    import torch

    torch.set_num_threads(2)
    x, w, b, gy = (torch.from_numpy(a) for a in (x, w, b, gy))
    return (lambda: torch.addmm(b, x, w.T)), (lambda: (gy @ w, gy.T @ x, gy.sum(0)))


def child(backend: str) -> None:
    from tinyformer import registry

    rng = np.random.default_rng(0)
    rows = []
    for n_in, n_out in SHAPES:
        x, w = (rng.standard_normal(s, dtype=np.float32) for s in ((ROWS, n_in), (n_out, n_in)))
        b, gy = rng.standard_normal(n_out, dtype=np.float32), np.ones((ROWS, n_out), np.float32)
        if backend == "torch":
            fwd, bwd = (median_us(f) for f in torch_products(x, w, b, gy))
        else:
            forward = functools.partial(registry.call, "linear.forward", x, w, b)
            backward = functools.partial(
                registry.call, "linear.backward", gy, x, w, True, True, True
            )
            with registry.prefer(backend, force=True):
                fwd, bwd = median_us(forward), median_us(backward)
        rows.append({"shape": f"({ROWS},{n_in})->{n_out}", "forward_us": fwd, "backward_us": bwd})
    print(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench-linear")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    from tinyformer.bench import machine, print_table, save_json
    from tinyformer.runtime import RUNTIME_ENV

    results = []
    for label, (backend, threads) in RUNS.items():
        if backend == "torch" and importlib.util.find_spec("torch") is None:
            continue
        env = {**os.environ, **RUNTIME_ENV, "OPENBLAS_NUM_THREADS": threads}
        if backend == "torch":  # PyTorch with its own process defaults
            env = dict(os.environ)
        cmd = [sys.executable, __file__, "--child", backend]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        for row in json.loads(done.stdout.strip().splitlines()[-1]):
            results.append({"run": label, **row})
    totals = {}
    for row in results:
        totals[row["run"]] = totals.get(row["run"], 0.0) + row["forward_us"] + row["backward_us"]
    results += [{"run": run, "shape": "all four", "forward_us": None, "backward_us": None,
                 "total_us": total} for run, total in totals.items()]  # fmt: skip
    columns = ["run", "shape", "forward_us", "backward_us", "total_us"]
    print_table(f"linear, float32, {ROWS} rows (median µs)", results, columns)
    save_json(args.out / "linear_one_pool.json", {"machine": machine(), "results": results})
    print(f"\nJSON: {args.out / 'linear_one_pool.json'}")


if __name__ == "__main__":
    main()
