"""Benchmark harness: time cases, print a table, keep the figures as JSON and a PNG chart.

The benchmarks themselves live in the repository's `benchmarks/` folder (`python -m benchmarks`,
or `make bench`). Timings are the median of several repeats after a warm-up; they are
measurements of this machine, not tests: nothing here asserts.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tinyformer.fileio import save_figure, save_json, save_text

__all__ = [
    "interleaved_median_times", "markdown_table", "median_time", "print_table", "save_chart",
    "save_json", "save_text",
]  # fmt: skip


def interleaved_median_times(
    fns: dict[str, Callable[[], Any]], repeats: int = 15, rounds: int = 3, warmup: int = 2
) -> dict[str, float]:
    """Median wall time of each function in seconds, the repeats taken in `rounds` alternating
    batches (a, b, a, b, ...) so that a slow spell of a shared machine falls on every function,
    not on whichever happened to be timed during it: the ratios stay steady."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    per_round = -(-repeats // rounds)
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def median_time(fn: Callable[[], Any], repeats: int = 7, warmup: int = 2) -> float:
    """Median wall time of `fn()` in seconds."""
    return interleaved_median_times({"fn": fn}, repeats, rounds=1, warmup=warmup)["fn"]


def _cell(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def markdown_table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> str:
    """The same table as `print_table`, in Markdown (for the docs)."""
    columns = [c for c in columns if any(c in r for r in rows)]
    lines = [f"**{title}**", "", "| " + " | ".join(columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(_cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def print_table(title: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = [max(len(c), *(len(_cell(r.get(c, ""))) for r in rows)) for c in columns]
    print(f"\n{title}")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(_cell(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))


def machine() -> dict[str, Any]:
    import numpy as np

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def save_chart(
    path: Path,
    rows: list[dict[str, Any]],
    label: str,
    bars: list[str],
    title: str,
    unit: str = "milliseconds (median)",
) -> None:
    """A grouped horizontal bar chart of the `bars` columns, one group per row."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 0.45 * len(rows) + 1.5))
    ax = fig.subplots()
    height = 0.8 / len(bars)
    for i, column in enumerate(bars):
        ys = [j + i * height for j in range(len(rows))]
        ax.barh(ys, [r[column] for r in rows], height=height, label=column)
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(rows))])
    ax.set_yticklabels([r[label] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
