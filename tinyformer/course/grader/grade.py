"""`tinyformer grade NAME [DIR]`: the offline autograder, a security boundary.

The student's code never shares a process with the checks or the results. The grade runs in a
temporary folder: a pristine copy of the release made from the running tinyformer, with only
the assignment's student files (`Assignment.files`) copied from DIR over it (`_tree`). Each
task runs in a child process of its own (`_sandbox`: new session, wall-clock timeout, memory
and output limits, optionally another user), which gets inputs and returns arrays (`_child`,
`_wire`). This process, running the instructor's code, computes every expected value from
the instructor's reference and does every comparison and the hidden tests (`_verdicts`,
`_gradcheck`, `_remote`), after the visible checks of every task, each in a fresh child. An
exit, hang or crash costs its own task, with a one-line reason; a check that raises fails
alone. Nothing is written until every child's processes are gone.

The expected values come from, in order: `--data FILE`; the running tinyformer, when it holds
NAME's solutions (the instructor's tree: computed afresh, in memory, on samples drawn from the
secret salt of `--secret FILE` or the tree's `grading-secret`); the running release's
`assignments/NAME.grading.npz` (public samples: a self-check, not a grade). Never from DIR.

Scores follow Gradescope's results.json: `{"execution_time", "output", "tests": [{"name",
"score", "max_score", "output", "visibility"}]}`; hidden tests are "after_published" (or as
`hidden_visibility` says), and neither the top-level output nor a top-level score counts them.
"""

from __future__ import annotations

import math
import os
import pwd
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyformer.course.definition import Assignment, Task, assignment
from tinyformer.course.grader import _room, _tree, _verdicts
from tinyformer.course.grader import data as grading_data
from tinyformer.course.grader._room import GradeInterrupted
from tinyformer.course.grader._sandbox import Child, ChildGone, Limits, reaping
from tinyformer.course.grader._text import clean
from tinyformer.course.grader._tree import SubmissionError
from tinyformer.course.grader.secret import read_secret
from tinyformer.course.markers import solution_regions

__all__ = [
    "CheckResult", "Grade", "GradeInterrupted", "SubmissionError", "grade", "has_solutions",
    "is_tree",
]  # fmt: skip

DEFAULT_TIMEOUT = 120.0  # seconds per task and phase; a correct task takes under 2 s
OUTPUT_CHARS = 4000  # of one check's report
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
CHECKS = {
    "forward": _verdicts.forward, "gradcheck": _verdicts.gradcheck, "kernel": _verdicts.kernel,
}  # fmt: skip


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

    @property
    def hidden(self) -> bool:
        return self.check == "hidden"

    def gradescope(self, hidden_visibility: str = "after_published") -> dict[str, Any]:
        return {
            "name": self.name, "score": self.score, "max_score": self.max_score,
            "output": self.output, "visibility": hidden_visibility if self.hidden else "visible",
        }  # fmt: skip


@dataclass
class Grade:
    assignment: str
    tree: Path
    data_source: str
    results: list[CheckResult]
    seconds: float
    containment: str = ""  # who ran the student's code, and within which walls

    @property
    def score(self) -> int:
        return sum(r.score for r in self.results)

    @property
    def max_score(self) -> int:
        return sum(r.max_score for r in self.results)

    def summary(self) -> str:
        """ "A2: 10 of 10 available points (3 more in hidden tests, graded on submission)"."""
        shown = [r for r in self.results if not r.hidden or r.status != "not available"]
        held = sum(r.max_score for r in self.results if r not in shown)
        text = f"{self.assignment}: {sum(r.score for r in shown)} of "
        text += f"{sum(r.max_score for r in shown)} available points"
        return text + (f" ({held} more in hidden tests, graded on submission)" if held else "")

    def gradescope(self, hidden_visibility: str = "after_published") -> dict[str, Any]:
        """Gradescope's results.json; no top-level score, so that Gradescope adds up the tests
        and keeps hidden ones out of what a student sees before they are published."""
        visible = [r for r in self.results if not r.hidden]
        output = f"{self.assignment}: {sum(r.score for r in visible)} of "
        output += f"{sum(r.max_score for r in visible)} points in the visible tests"
        return {
            "execution_time": round(self.seconds, 1),
            "output": output,
            "tests": [r.gradescope(hidden_visibility) for r in self.results],
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
        lines += ["", self.summary()]
        return "\n".join(lines)


def is_tree(path: Path) -> bool:
    return (path / "tinyformer" / "__init__.py").is_file()


def has_solutions(a: Assignment) -> bool:
    """Whether the running tinyformer's sources hold a solution region of each of `a`'s tasks."""
    wanted = {t.id for t in a.tasks}
    for path in _tree.package_source().rglob("*"):  # Python and CUDA sources (A5.3's kernel)
        wanted -= {r.tag for r in solution_regions(path)}
        if not wanted:
            return True
    return False


def _release_data(name: str) -> Path:
    return grading_data.data_path(_tree.package_source().parent, name)


def load_data(
    a: Assignment, data: str | os.PathLike | None, secret: str | os.PathLike | None = None
) -> tuple[str, dict[str, Any]]:
    """Where the expected values come from, and the values; ValueError if they are missing or
    are not `a`'s. In the instructor's tree they are computed now from its reference, on
    samples drawn from the secret salt; in a release they are its public samples (a
    self-check, not a grade)."""
    if data is not None:
        path = Path(data).resolve()
        if not path.is_file():
            raise ValueError(f"--data: no grading data file {path}")
        try:
            meta = grading_data.load(path)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"--data: {path} is not a grading data file ({err})") from None
        source = f"the file {path.name}"
    elif has_solutions(a):
        salt = read_secret(secret)
        source = "the instructor's reference, on samples drawn from the grading secret"
        meta = grading_data.compute(a, salt=salt)
    elif secret is not None:
        raise ValueError(
            f"--secret: the installed tinyformer is not the instructor's tree and holds no "
            f"reference for {a.name}: grade with the instructor's tree"
        )
    elif _release_data(a.name).is_file():
        source = (
            f"SELF-CHECK on the public samples of the release's {_release_data(a.name).name} "
            "(not the grade: grading uses samples no student has seen)"
        )
        meta = grading_data.load(_release_data(a.name))
    else:
        raise ValueError(
            f"no grading data for {a.name}: the installed tinyformer is not the instructor's "
            f"tree and has no assignments/{a.name}.grading.npz; give --data FILE"
        )
    if not isinstance(meta, dict) or meta.get("assignment") != a.name:
        found = meta.get("assignment") if isinstance(meta, dict) else None
        raise ValueError(f"the grading data is {found!r}'s, not {a.name}'s")
    if not isinstance(meta.get("tasks"), dict):
        raise ValueError("the grading data has no tasks")
    return source, meta


class _Run:
    """What every task's children share: the tree, the limits, the data and the checks."""

    def __init__(self, a: Assignment, root: Path, limits: Limits, meta: dict, spare: set[int]):
        from tinyformer.testing import all_specs

        self.a, self.root, self.limits, self.meta, self.spare = a, root, limits, meta, spare
        self.specs = {s.name: s for s in all_specs()}
        # property and hidden tests compare with the instructor's code only where it runs here
        self.reference = has_solutions(a)
        self.checks = a.checks_module()
        self.kernels = any(t.kernel is not None for t in a.tasks)

    def hidden_source(self) -> str | None:
        marked = getattr(self.checks, "IN_CHILD", ())
        if not marked or self.checks is None or not getattr(self.checks, "HIDDEN", None):
            return None
        return Path(self.checks.__file__).read_text(encoding="utf-8")

    def check(self, child: Child, task: Task, kind: str) -> tuple[Any, str]:
        """One check's verdict; a check that raises (a malformed reply, a grader bug on an odd
        input) fails with a message and gives no points, and never stops the grade."""
        try:
            if kind in CHECKS:
                return CHECKS[kind](child, task, self.meta, self.specs)
            if self.checks is None:
                return None, "no tests of this kind in this copy of the course"
            table = "HIDDEN" if kind == "hidden" else "PROPERTIES"
            source = self.hidden_source() if kind == "hidden" else None
            seeds = (self.meta.get("test_seeds") or {}).get(task.id)
            return _verdicts.run_tests(
                child, task, self.checks, table, source, self.a.checks, self.reference, seeds
            )
        except ChildGone:
            raise
        except Exception as err:
            why = clean(f"{type(err).__name__}: {err}", 2000)
            return False, f"{task.id} {kind}: the check could not run ({why}); no points"

    def task(self, task: Task, kinds: list[str]) -> dict[str, tuple[Any, str]]:
        """The verdicts of `kinds` (all visible, or ["hidden"]) of `task`, in a fresh child
        whose folder names neither the task nor the phase."""
        if kinds == ["hidden"] and not (getattr(self.checks, "HIDDEN", None) or {}).get(task.id):
            return {"hidden": (None, "no tests of this kind in this copy of the course")}
        if self.limits.deadline is not None and time.monotonic() >= self.limits.deadline:
            why = f"{task.id}: not run: the grade ran past its overall time limit"
            return {kind: (False, why) for kind in kinds}
        child = Child(self.root / "tree", self.root / "deps", self.root, self.limits,
                      task.kernel is not None, self.spare)  # fmt: skip
        out: dict[str, tuple[Any, str]] = {}
        try:
            child.start()
            if child.fatal is not None:
                why = f"{task.id}: the code could not be loaded:\n{child.fatal}"
                return self._clean({kind: (False, why) for kind in kinds})
            for kind in kinds:
                out[kind] = self.check(child, task, kind)
        except ChildGone as gone:
            why = f"{task.id}: {gone}"
            tail = child.output().strip()
            detail = why + (f"\nlast output:\n{tail}" if tail else "")
            for kind in kinds:
                if kind not in out:
                    out[kind] = (False, detail if not out and kind == kinds[0] else why)
                    detail = why
        finally:
            child.close()
        return self._clean(out)

    def _clean(self, out: dict[str, tuple[Any, str]]) -> dict[str, tuple[Any, str]]:
        """Outputs without escape codes, capped, and without the grading folder's path (the
        student's messages may quote its files' paths: no business of the report)."""
        here = str(self.root)
        return {
            k: (p, clean(str(o).replace(here + os.sep, "").replace(here, ""), OUTPUT_CHARS))
            for k, (p, o) in out.items()
        }


def _results(a: Assignment, tasks: list[Task], records: dict) -> list[CheckResult]:
    results = []
    for task in tasks:
        for kind, points in task.points.items():
            passed, output = records.get((task.id, kind), (False, "not run"))
            if passed is None:
                status, score = "not available", 0
            else:
                status, score = ("passed", points) if passed else ("FAILED", 0)
            results.append(CheckResult(task.id, task.title, kind, points, score, status, output))
    return results


def _selected(a: Assignment, only: list[str] | None) -> list[Task]:
    if not only:
        return list(a.tasks)
    known = {t.id for t in a.tasks}
    unknown = [t for t in only if t not in known]
    if unknown:
        raise ValueError(f"--task: {', '.join(unknown)} not in {a.name} ({', '.join(known)})")
    return [t for t in a.tasks if t.id in only]


@_room.interrupts()
def grade(
    name: str,
    tree: str | os.PathLike = ".",
    *,
    data: str | os.PathLike | None = None,
    secret: str | os.PathLike | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    tasks: list[str] | None = None,
    user: str | None = None,
    memory: int | None = Limits.memory,
    total_timeout: float | None = None,
) -> Grade:
    """Grade assignment `name` in the submission at `tree` (a tinyformer tree, or a folder
    holding the student's files).

    Args:
        timeout: wall-clock seconds per task, and again for its hidden tests.
        secret: the file of the grading salt (default: the instructor tree's grading-secret).
        tasks: grade only these task ids.
        user: run the student's code as this unprivileged user; required when the grader
            runs as root (which it must, to switch users).
        memory: bytes of address space for the student's code, or None.
        total_timeout: wall-clock seconds for the whole grade (default: `timeout` for each
            child, visible and hidden, plus a minute).

    Raises:
        ValueError: unknown assignment or task, no such folder, bad timeout, bad grading data,
            root without `user`, or a secret within the user's reach.
        SubmissionError: a student file is a link, under one, not a regular file or too large;
            or DIR holds none of the assignment's files.
        GradeInterrupted: SIGINT, SIGTERM or SIGHUP; the children are gone, nothing written.
    """
    a = assignment(name)
    submission = Path(tree).resolve()
    if not submission.is_dir():
        raise ValueError(f"DIR: {submission} is not a folder")
    for flag, value in (("--timeout", timeout), ("--total-timeout", total_timeout)):
        if value is not None and not (
            isinstance(value, int | float) and math.isfinite(value) and value > 0
        ):
            raise ValueError(f"{flag}: need a finite number of seconds > 0, got {value!r}")
    user = _room.grading_user(user)
    selected = _selected(a, tasks)
    runs = sum(len(task_phases(t)) for t in selected)
    began = time.monotonic()  # the whole grade's limit counts the grader's own work too
    deadline = began + _room.total_timeout(timeout, runs, total_timeout)
    source, meta = load_data(a, data, secret)
    if user is not None:
        _room.refuse_readable(user, _room.protected(data, secret, has_solutions(a)))
    files = _tree.read_submission(submission, a.files, user)
    if not files and not is_tree(submission):  # the student's doing: a result, not a crash
        raise _tree.SubmissionError(
            f"DIR: {submission} is not a tinyformer tree and holds none of {a.name}'s files "
            f"({', '.join(a.files)})"
        )
    start, records = time.perf_counter(), {}
    limits = Limits(timeout, memory, user, deadline)
    with tempfile.TemporaryDirectory(prefix="tinyformer-grade-") as tmp:
        room = Path(tmp)  # 0700: this grade's, and its user's
        kernels = any(t.kernel is not None for t in a.tasks)
        missing = _tree.build_tree(a, room / "tree", files, kernels)
        _tree.compile_library(a, room / "tree")
        _tree.deps_folder(room / "deps", kernels)
        if user is not None:
            _tree.readable(room / "tree")
            entry = pwd.getpwnam(user)
            os.chown(room, entry.pw_uid, entry.pw_gid)
        with reaping() as spare:
            run = _Run(a, room, limits, meta, spare)
            for phase in ("visible", "hidden"):  # every visible check before any hidden one
                for task in selected:
                    kinds = task_phases(task).get(phase)
                    if kinds:
                        for kind, result in run.task(task, kinds).items():
                            records[task.id, kind] = result
    results = _results(a, selected, records)
    if missing:
        note = "not in the submission (the release's stub was graded): " + ", ".join(missing)
        results = [_note(r, note) for r in results]
    seconds = time.perf_counter() - start
    return Grade(a.name, submission, source, results, seconds, _room.containment(user))


def task_phases(task: Task) -> dict[str, list[str]]:
    """The kinds of `task`'s checks by phase: each phase that has any runs in a child."""
    found: dict[str, list[str]] = {}
    for kind in task.points:
        found.setdefault("hidden" if kind == "hidden" else "visible", []).append(kind)
    return found


def _note(r: CheckResult, note: str) -> CheckResult:
    if "NotImplementedError" not in r.output:
        return r
    return CheckResult(r.task, r.title, r.check, r.max_score, r.score, r.status,
                       f"{r.output}\n({note})")  # fmt: skip
