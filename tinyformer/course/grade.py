"""`tinyformer grade NAME [DIR]`: the offline autograder.

The grading runs in a subprocess (`_runner.py`, by path, under `python -I -S`) whose `sys.path`
starts with DIR, so it grades DIR's code, not the installed tinyformer, with every primitive
forced to its NumPy reference (except in a "kernel" check, which compares the student's kernel
with the reference). The instructor's values come from, in order: `--data FILE`; the
running tinyformer, when it holds NAME's solutions (the instructor's tree: values are computed
afresh, so a student cannot edit them); DIR's `course/NAME.grading.npz` (a student grading
their own release).

Scores follow Gradescope's results.json:
`{"score": s, "execution_time": t, "output": o, "tests": [{"name", "score", "max_score",
"output", "visibility"}]}`; hidden tests are "after_published".
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tinyformer.course import data as grading_data
from tinyformer.course.definition import Assignment, Task, assignment
from tinyformer.course.markers import MarkerError, find_regions, syntax_of
from tinyformer.course.release import data_path

__all__ = ["CheckResult", "Grade", "grade", "has_solutions", "is_tree"]

DEFAULT_TIMEOUT = 300.0
HERE = Path(__file__).resolve().parent


@dataclass
class CheckResult:
    task: str
    title: str
    check: str
    max_score: int
    score: int
    status: str  # "passed", "FAILED", "not run", "not available"
    output: str

    @property
    def name(self) -> str:
        return f"{self.task} {self.title}: {self.check}"

    def gradescope(self) -> dict[str, Any]:
        visibility = "after_published" if self.check == "hidden" else "visible"
        return {
            "name": self.name, "score": self.score, "max_score": self.max_score,
            "output": self.output, "visibility": visibility,
        }  # fmt: skip


@dataclass
class Grade:
    assignment: str
    tree: Path
    data_source: str
    results: list[CheckResult]
    seconds: float

    @property
    def score(self) -> int:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> int:
        return sum(r.max_score for r in self.results)

    def gradescope(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "execution_time": round(self.seconds, 1),
            "output": f"{self.assignment}: {self.score} of {self.max_score} points",
            "tests": [r.gradescope() for r in self.results],
        }

    def table(self) -> str:
        rows = [("task", "check", "points", "status")]
        rows += [(r.task, r.check, f"{r.score}/{r.max_score}", r.status) for r in self.results]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3] for row in rows]
        reports: dict[str, list[CheckResult]] = {}  # one report for the checks that share it
        for r in self.results:
            if r.status != "passed":
                reports.setdefault(r.output, []).append(r)
        for output, failed in reports.items():
            names = f"{failed[0].name}" + (f" (and {len(failed) - 1} more)" if failed[1:] else "")
            lines += ["", f"--- {names}: {failed[0].status}", output]
        lines += ["", f"{self.assignment}: {self.score} of {self.max_score} points"]
        return "\n".join(lines)


def is_tree(path: Path) -> bool:
    return (path / "tinyformer" / "__init__.py").is_file()


def has_solutions(a: Assignment) -> bool:
    """Whether the running tinyformer's sources hold a solution region of each of `a`'s tasks."""
    import tinyformer

    wanted = {t.id for t in a.tasks}
    for path in Path(tinyformer.__file__).resolve().parent.rglob("*"):
        syntax = syntax_of(path)  # Python sources, and CUDA sources (A5.3's kernel)
        if syntax is None or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "### BEGIN SOLUTION" not in text:
            continue
        try:  # real regions only: a docstring may quote a marker
            regions = find_regions(text.splitlines(), str(path), syntax)
        except MarkerError:
            continue
        wanted -= {r.tag for r in regions if r.kind == "SOLUTION"}
        if not wanted:
            return True
    return False


def _task_job(task: Task) -> dict[str, Any]:
    """What the runner needs of `task`, as JSON."""
    job: dict[str, Any] = {"id": task.id, "points": dict(task.points)}
    if task.kernel is not None:
        job["kernel"] = {**asdict(task.kernel), "tol": dict(task.kernel.tol)}
    return job


def _site_folders() -> list[str]:
    # Not the user's site folder: `-s`'s isolation, so only the environment's packages count.
    return [f for f in site.getsitepackages() if os.path.isdir(f)]


def _read_records(path: Path) -> tuple[dict[tuple[str, str], dict], str | None]:
    records, fatal = {}, None
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if "fatal" in record:
                fatal = record["fatal"]
            else:
                records[record["task"], record["check"]] = record
    return records, fatal


def _results(a: Assignment, records: dict, why_missing: str) -> list[CheckResult]:
    results = []
    for task in a.tasks:
        for kind, points in task.points.items():
            record = records.get((task.id, kind))
            if record is None:
                status, score, output = "not run", 0, why_missing
            elif record["passed"] is None:
                status, score, output = "not available", 0, record["output"]
            else:
                passed = bool(record["passed"])
                status, score = ("passed", points) if passed else ("FAILED", 0)
                output = record["output"]
            results.append(CheckResult(task.id, task.title, kind, points, score, status, output))
    return results


def grade(
    name: str,
    tree: str | os.PathLike = ".",
    *,
    data: str | os.PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Grade:
    """Grade assignment `name` in the tree at `tree`.

    Raises:
        ValueError: unknown assignment, `tree` is not a tinyformer tree, or no grading data.
    """
    a = assignment(name)
    tree = Path(tree).resolve()
    if not is_tree(tree):
        raise ValueError(f"{tree} is not a tinyformer tree (no tinyformer/__init__.py in it)")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tinyformer-grade-") as tmp:
        tmp = Path(tmp)
        if data is not None:
            source, data = f"the file {data}", Path(data)
            if not data.is_file():
                raise ValueError(f"no grading data file {data}")
        elif has_solutions(a):
            source, data = "the instructor's tree (computed now)", tmp / "data.npz"
            grading_data.save(data, grading_data.compute(a))
        elif data_path(tree, a.name).is_file():
            source, data = f"the release's {data_path(tree, a.name)}", data_path(tree, a.name)
        else:
            raise ValueError(
                f"no grading data for {a.name}: {data_path(tree, a.name)} is missing and the "
                "installed tinyformer is not the instructor's tree; give --data FILE"
            )
        job = {
            "tree": str(tree), "site": _site_folders(), "data": str(data),
            "codec": str(HERE / "_codec.py"), "results": str(tmp / "results.jsonl"),
            "checks": str(HERE / a.checks) if a.checks else None,
            "tasks": [_task_job(t) for t in a.tasks],
            # a kernel assignment grades DIR as installed: tinyformer.kernels is DIR's kernels/
            "kernels": any(t.kernel is not None for t in a.tasks),
        }  # fmt: skip
        (tmp / "job.json").write_text(json.dumps(job), encoding="utf-8")
        command = [sys.executable, "-I", "-S", str(HERE / "_runner.py"), str(tmp / "job.json")]
        why = "the grader stopped before this check"
        try:
            done = subprocess.run(
                command, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if done.returncode != 0:
                why += f" (exit status {done.returncode}):\n{done.stderr[-3000:]}"
        except subprocess.TimeoutExpired:
            why = f"not reached: grading stopped after the {timeout:.0f} s time limit"
        records, fatal = _read_records(tmp / "results.jsonl")
    if fatal is not None:
        why = f"the tree could not be loaded for grading:\n{fatal}"
    results = _results(a, records, why)
    return Grade(a.name, tree, source, results, time.perf_counter() - start)
