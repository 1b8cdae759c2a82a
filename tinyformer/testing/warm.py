"""Compile every kernel once, before the tests: `python -m tinyformer.testing.warm`.

Numba (`cache=True`) and the CUDA emulator keep what they compile on disk, and a warm cache loads
in a fraction of a second. Test workers running side by side (`pytest -n 2`) on a cold cache
would each compile their own copy, and two processes saving different signatures of one Numba
function at the same moment can both claim the same data file of its index, leaving an entry
that loads the wrong machine code. Running this first leaves them only loading.

It runs `check_backend` once per op with kernels, backend and dtype (float32 and float64), the
calls the generic op suite makes, then the kernels' paths those calls seldom reach (OTHER_PATHS:
attention's tiles, conv2d's per-image products, ...). A check that fails here is only counted:
the tests report it.

The compiling takes two processes, one per part, so both cores work. That is safe only while
the parts compile disjoint sets of Numba functions (a kernel's helpers included), so each part
lists the functions it compiled, and an overlap stops the run with what to move.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from tinyformer import registry
from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import check_backend, kernel_backends

__all__ = ["PART_TWO", "compiled_functions", "overlap_message", "warm"]

# The ops compiled by the second process: attention, the row-wise ops, dropout and embedding,
# about half of the compile time (the conv family, pooling, linear and AdamW are the other half).
# They share no Numba function with the rest (checked at every cold run).
PART_TWO = (
    "scaled_dot_product_attention", "softmax", "log_softmax", "cross_entropy", "gelu",
    "layer_norm", "dropout", "embedding",
)  # fmt: skip


def warm(part: int | None = None) -> tuple[int, int]:
    """Compile (or load) the registered kernels in float32 and float64: all of them, or part 1
    (the ops not in PART_TWO) or part 2. Returns (checks run, checks that failed)."""
    runs = failed = 0
    for spec in all_specs():
        if not _in_part(spec.name, part):
            continue
        for backend in kernel_backends(spec):
            for dtype in (np.float32, np.float64):
                runs += 1
                try:
                    check_backend(spec, backend, dtype, RandomDraw(0))
                except Exception:  # a wrong or broken kernel: the test suite says which and why
                    failed += 1
    for op, path in OTHER_PATHS.items():
        if not _in_part(op, part):
            continue
        for dtype in (np.float32, np.float64):
            runs += 1
            try:
                path(np.random.default_rng(0), dtype)
            except Exception:  # as above
                failed += 1
    return runs, failed


def _in_part(op: str, part: int | None) -> bool:
    """Whether `part` (None: both) compiles the kernels of `op`."""
    return part is None or (op in PART_TWO) == (part == 2)


# Paths of the Numba kernels that the ops' samples seldom reach (their own tests do): each called
# once per dtype, so that those tests load them too (OTHER_PATHS, by op). Through the registry,
# which applies the thread settings that some of the paths' rules ask for.


def _numba(name: str, *args, **kwargs):
    with registry.prefer("numba", force=True):
        return registry.call(name, *args, **kwargs)


def _attention_tiles(rng, dtype) -> None:
    """Attention over more than SHORT_KEYS keys goes through the tiles."""
    q, k, v = (rng.standard_normal((2, 1, t, 8)).astype(dtype) for t in (4, 300, 300))
    y, lse = _numba("attention.forward", q, k, v, None, False, 0.5)
    _numba("attention.backward", y, q, k, v, y, lse, None, False, 0.5)


def _conv2d_per_image(rng, dtype) -> None:
    """conv2d at stride 1 on small images, an image for every worker: per-image products."""
    import numba

    x = rng.standard_normal((numba.get_num_threads(), 2, 5, 5)).astype(dtype)
    w, b = rng.standard_normal((3, 2, 3, 3)).astype(dtype), np.zeros(3, dtype)
    y = _numba("conv2d.forward", x, w, b, (1, 1), (1, 1), (1, 1), 1)
    _numba("conv2d.backward", y, x, w, (1, 1), (1, 1), (1, 1), 1)


def _conv_transpose2d_stamps(rng, dtype) -> None:
    """conv_transpose2d with kernel = stride, an image for every worker: one stamp per pixel."""
    import numba

    x = rng.standard_normal((numba.get_num_threads(), 2, 3, 3)).astype(dtype)
    w, b = rng.standard_normal((2, 3, 2, 2)).astype(dtype), np.zeros(3, dtype)
    settings = ((2, 2), (0, 0), (0, 0), (1, 1), 1)
    y = _numba("conv_transpose2d.forward", x, w, b, *settings)
    _numba("conv_transpose2d.backward", y, x, w, *settings)


def _adamw(rng, dtype) -> None:
    """The optimizer's update, which is no op."""
    p, g, m, v = (np.zeros(8, dtype) for _ in range(4))
    hyper = {"lr": 0.1, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
    _numba("adamw.step", p, g, m, v, **hyper, step=1)


OTHER_PATHS = {
    "scaled_dot_product_attention": _attention_tiles,
    "conv2d": _conv2d_per_image,
    "conv_transpose2d": _conv_transpose2d_stamps,
    "adamw": _adamw,
}


def compiled_functions() -> set[str]:
    """The cached Numba functions this process compiled (and so wrote to the cache) rather
    than loaded, helpers included, each as 'file:line:name' (what names its cache index)."""
    from numba.core.registry import CPUDispatcher

    found = set()
    for obj in gc.get_objects():
        # cache_path is None for the functions Numba never caches (its own overloads, say)
        if isinstance(obj, CPUDispatcher) and obj.stats.cache_path and obj.stats.cache_misses:
            code = obj.py_func.__code__
            found.add(f"{code.co_filename}:{code.co_firstlineno}:{obj.py_func.__qualname__}")
    return found


def overlap_message(one: set[str], two: set[str]) -> str | None:
    """What to do when both parts compiled the same function, or None when they did not."""
    both = sorted(one & two)
    if not both:
        return None
    names = "\n  ".join(both)
    return (
        f"warm: both parts compiled these Numba functions:\n  {names}\n"
        "Their cache entries may be mixed up: run `make clean`, then move the ops that use them "
        "into one part (PART_TWO in tinyformer/testing/warm.py)."
    )


def _part(part: int, report: Path) -> None:
    runs, failed = warm(part)
    report.write_text(json.dumps({"runs": runs, "failed": failed,
                                  "compiled": sorted(compiled_functions())}))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compile every kernel once, before the tests.")
    parser.add_argument("--part", type=int, choices=[1, 2], help=argparse.SUPPRESS)
    parser.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--one-process", action="store_true", help="compile in this process only")
    args = parser.parse_args(argv)
    if args.part:
        _part(args.part, args.report)
        return 0
    if args.one_process:
        runs, failed = warm()
    else:
        with tempfile.TemporaryDirectory() as folder:
            reports = [Path(folder) / "1.json", Path(folder) / "2.json"]
            child = subprocess.Popen([sys.executable, "-m", "tinyformer.testing.warm",
                                      "--part", "2", "--report", str(reports[1])])  # fmt: skip
            _part(1, reports[0])
            if child.wait() != 0:
                print(f"warm: part 2 exited with status {child.returncode}", file=sys.stderr)
                return 1
            one, two = (json.loads(r.read_text()) for r in reports)
        message = overlap_message(set(one["compiled"]), set(two["compiled"]))
        if message:
            print(message, file=sys.stderr)
            return 1
        runs, failed = one["runs"] + two["runs"], one["failed"] + two["failed"]
    note = f" ({failed} failed: the tests will say why)" if failed else ""
    print(f"kernels compiled or loaded from cache: {runs} op/backend/dtype checks{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
