"""`python -m benchmarks [--only SECTIONS] [--runs N] [--quick] [--out DIR]`: print the
tables, write JSON and PNG charts. Sections: engine, ops, kernels, vision (conv and pooling),
memory; a pulse of the machine (`pulse.py`) before and after them tells a quiet run from a
disturbed one. The kernel tables are timed `--runs` times, every table once a run, and report
each number's median over the runs with the lowest and highest speedup (`combine_runs`).

Run as a program it restarts itself once with `tinyformer.runtime.BENCH_ENV`: the process
settings `tinyformer train` runs with, except that BLAS keeps both threads, so that each
kernel is compared with its reference on two cores."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.cases import BABY, engine_overhead, op_timings
from benchmarks.kernels import (
    attention_memory,
    combine_runs,
    geometric_mean,
    kernel_timings,
    time_cases,
)
from benchmarks.pulse import describe, gemm_rate, pulse
from benchmarks.vision import vision_cases
from tinyformer.bench import (
    machine,
    markdown_table,
    print_table,
    save_chart,
    save_json,
    save_text,
)
from tinyformer.fileio import check_writable
from tinyformer.runtime import BENCH_ENV, restart_with_runtime_env

SMALL = {"B": 8, "T": 256, "C": 384, "nh": 6, "V": 65, "layers": 6}
QUICK = {"B": 2, "T": 8, "C": 16, "nh": 2, "V": 11}
SECTIONS = ("engine", "ops", "kernels", "vision", "memory")


class Report:
    """Prints each table, and keeps it as Markdown for bench.md."""

    def __init__(self) -> None:
        self.markdown: list[str] = []

    def table(self, title: str, rows: list[dict], columns: list[str]) -> None:
        print_table(title, rows, columns)
        self.markdown.append(markdown_table(title, rows, columns))

    def line(self, text: str) -> None:
        print(text)
        self.markdown.append(text + "\n")


def _kernel_sections(only: set[str], quick: bool) -> list[tuple[str, dict | None]]:
    """(name, model shapes) of each kernel table asked for; vision's cases carry their own."""
    sections: list[tuple[str, dict | None]] = []
    if "kernels" in only:
        sections += [("quick", QUICK)] if quick else [("baby", BABY), ("small", SMALL)]
    if "vision" in only:
        sections.append(("vision-quick" if quick else "vision", None))
    return sections


def _kernel_rows(name: str, shapes: dict | None, repeats: int, gemm: float) -> list[dict]:
    """One run of a kernel table: a row per case."""
    if shapes is None:
        return time_cases(vision_cases(quick="quick" in name), repeats, gemm)
    return kernel_timings(shapes, repeats, gemm)


def _kernels(
    name: str, shapes: dict | None, runs: list[list[dict]], out: Path, results: dict,
    report: Report,
) -> None:  # fmt: skip
    """Report a kernel table from its runs (`combine_runs`), with its chart and JSON."""
    rows = combine_runs(runs)
    speedups = [r["speedup"] for r in rows if "speedup" in r]
    columns = [
        "primitive",
        "shape",
        "default",
        "numpy_ms",
        "numba_ms",
        "speedup",
        *(["lowest", "highest"] if len(runs) > 1 else []),
        "GB/s",
        "GFLOP/s",
        "ceiling",
    ]
    if any("torch_ms" in r for r in rows):
        columns.append("torch_ms")
    timing = "median" if len(runs) == 1 else f"median of {len(runs)} runs"
    title = f"Kernels at {name} shapes {shapes or ''} (milliseconds, {timing})"
    report.table(title, rows, columns)
    report.line(
        f"geometric mean speedup: {geometric_mean(speedups):.2f}x over {len(speedups)} rows"
    )
    results[f"kernels_{name}"] = {
        "shapes": shapes,
        "rows": rows,
        "geomean": geometric_mean(speedups),
    }
    if len(runs) > 1:  # each run's own rows, for a closer look at the spread
        results[f"kernels_{name}"]["runs"] = runs
    if speedups:
        chart = [
            {"primitive": r["primitive"], "speedup": r["speedup"]} for r in rows if "speedup" in r
        ]
        save_chart(
            out / f"speedup_{name}.png",
            chart,
            "primitive",
            ["speedup"],
            f"Numba speedup over the NumPy reference, {name} shapes",
            unit="x reference",
        )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="output folder")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    parser.add_argument(
        "--runs",
        type=_positive,
        default=None,
        help="times each kernel table is timed; each number shown is the median over the runs, "
        "with the lowest and highest speedup (default 3, 1 with --quick)",
    )
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    try:  # before the timings, not after minutes of them
        check_writable(args.out)
    except OSError as err:
        parser.error(f"cannot write to --out {args.out}: {err}")
    repeats = 3 if args.quick else 15
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    results: dict = {"machine": machine(), "pulse": {"before": pulse()}}
    gemm_size = 256 if args.quick else 1024
    results["gemm_GFLOPs"] = gemm_rate(gemm_size)
    report = Report()
    report.line(f"machine pulse before: {describe(results['pulse']['before'])}")
    report.line(
        f"float32 GEMM ({gemm_size}^3, BLAS on all its threads): "
        f"{results['gemm_GFLOPs']:.0f} GFLOP/s; a row's ceiling is the speedup its flops would "
        "show at that rate"
    )

    if "engine" in only:
        engine = engine_overhead(
            n_ops=500 if args.quick else 10_000, repeats=3 if args.quick else 5
        )
        results["engine"] = engine
        report.table(
            f"Engine overhead: a chain of {engine['ops']} elementwise ops on one element "
            "(microseconds per op)",
            [engine],
            ["forward_us_per_op", "backward_us_per_op", "total_us_per_op", "numpy_us_per_op",
             "bookkeeping_us_per_op", "no_grad_forward_us_per_op", "torch_total_us_per_op"],
        )  # fmt: skip
    if "ops" in only:
        shapes = QUICK if args.quick else BABY
        ops = op_timings(shapes, repeats=2 if args.quick else 7)
        results["ops"] = {"shapes": shapes, "rows": ops}
        report.table(
            f"Ops through autograd at shapes {shapes} (milliseconds, median)",
            ops,
            ["op", "shape", "forward_ms", "backward_ms", "total_ms"],
        )
        save_chart(args.out / "ops.png", ops, "op", ["forward_ms", "backward_ms"], "tinyformer ops")
    sections = _kernel_sections(only, args.quick)
    runs, gemm = [], results["gemm_GFLOPs"]
    for run in range(args.runs if sections else 0):  # every table once a run: runs far apart
        if args.runs > 1:
            print(f"kernel tables: run {run + 1} of {args.runs}", flush=True)
        runs.append({name: _kernel_rows(name, shapes, repeats, gemm) for name, shapes in sections})
    for name, shapes in sections:
        _kernels(name, shapes, [run[name] for run in runs], args.out, results, report)
    if "memory" in only:
        lengths = (64, 128) if args.quick else (256, 1024, 4096)
        memory = attention_memory(lengths)
        results["attention_memory"] = memory
        report.table(
            "Attention forward + backward, one causal head of size 64: median time (ms) and peak "
            "memory allocated (MiB)",
            memory,
            list(memory[0]),
        )
    results["pulse"]["after"] = pulse()
    report.line(f"\nmachine pulse after: {describe(results['pulse']['after'])}")
    save_json(args.out / "bench.json", results)
    save_text(args.out / "bench.md", "\n".join(report.markdown))
    print(f"\nwrote {args.out}/bench.json, bench.md and charts")
    return 0


if __name__ == "__main__":
    # Time the kernels under the process settings training runs with (BLAS on two threads,
    # though); without them OpenBLAS threads left spinning by each reference's matrix products
    # hold a core while the kernel timed next runs (attention backward at baby shapes: 2.0x
    # instead of 2.8x).
    restart_with_runtime_env("benchmarks", BENCH_ENV)
    raise SystemExit(main())
