"""Who the student's code runs as, what it must not reach, and how a grade ends.

- `grading_user`: a grader running as root runs the student's code as an unprivileged user
  (`--user`), or refuses: root's children could read the secret, the instructor's tree and
  every other grade. (`TINYFORMER_GRADE_AS_ROOT=1` lets root grade trusted code, e.g. the
  instructor's own tree in CI.)
- `refuse_readable`: with `--user`, the grading secret, the data file and the instructor's
  package must be out of that user's reach, checked as that user (a forked process with its
  uid and no extra groups), and the user must be able to run Python and reach the grade's
  temporary folder; else the grade is refused with the path.
- `interrupts`: SIGINT, SIGTERM or SIGHUP to the grader end the grade cleanly
  (`GradeInterrupted`: the children are killed on the way out, nothing is written).
- `total_timeout`: the wall-clock limit of the whole grade.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tinyformer.course.grader import _landlock, _tree, _wire
from tinyformer.course.grader._sandbox import as_user

__all__ = [
    "AS_ROOT", "GradeInterrupted", "containment", "grading_user", "instructor_folders",
    "interrupts", "protected", "refuse_readable", "total_timeout",
]  # fmt: skip

AS_ROOT = "TINYFORMER_GRADE_AS_ROOT"
SLACK = 60.0  # seconds of the whole grade's limit for the grader's own work


class GradeInterrupted(BaseException):
    """The grader was sent SIGINT, SIGTERM or SIGHUP; the grade is abandoned. (Like
    KeyboardInterrupt, no `except Exception` of a check may swallow it.)"""

    def __init__(self, number: int) -> None:
        super().__init__(f"grading interrupted by {signal.Signals(number).name}")
        self.number = number


def grading_user(user: str | None) -> str | None:
    """The user to run the student's code as, checked; ValueError if root has none."""
    root = os.geteuid() == 0
    if user is not None and not root:
        raise ValueError(f"--user {user}: the grader must run as root to switch users")
    if user is None:
        if root and os.environ.get(AS_ROOT) != "1":
            raise ValueError(
                "the grader runs as root: give --user NAME, an unprivileged user to run the "
                "submission's code as (the autograder's setup.sh makes `student`), so that it "
                "cannot read the grading secret, the instructor's tree or other grades. (To "
                f"grade trusted code as root, e.g. your own tree in CI, set {AS_ROOT}=1.)"
            )
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ValueError(f"--user: no user named {user!r} on this machine") from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise ValueError(f"--user {user}: need an unprivileged user, not uid/gid 0")
    return user


def instructor_folders() -> list[Path]:
    """The running tinyformer's package and kernels (the instructor's, with the answers)."""
    found = [_tree.package_source()]
    kernels = _tree.kernels_source()
    if kernels is not None and not kernels.is_relative_to(found[0]):
        found.append(kernels)
    return found


def protected(data: Any, secret: Any, instructor: bool) -> dict[str, Path]:
    """What the grading user must not read: the data file, the grading secret, and, where the
    running tinyformer is the instructor's (`instructor`), its package and kernels."""
    from tinyformer.course.grader import secret as grading_secret

    found: dict[str, Path] = {}
    if data is not None:
        found["the grading data"] = Path(data).resolve()
    if secret is not None or instructor:
        path = Path(secret) if secret is not None else grading_secret.default_path()
        if path.exists():
            found["the grading secret"] = path.resolve()
    if instructor:
        for folder in instructor_folders():
            found[f"the instructor's {folder.name} folder"] = folder
    return found


def _reach(paths: list[str], needs: list[str]) -> bytes:
    """1 or 0 for each of `paths`, whether this process can read it (a folder: list or enter
    it), then for each of `needs`, whether it can run or enter it."""
    flags = [
        int(os.access(p, os.R_OK) or (os.path.isdir(p) and os.access(p, os.X_OK))) for p in paths
    ]
    return _wire.encode(flags + [int(os.access(p, os.X_OK)) for p in needs])


def refuse_readable(user: str, secrets: dict[str, Path]) -> None:
    """ValueError naming the first of `secrets` ({what: path}) that `user` can read, or what
    it needs and cannot reach (Python, the temporary folder)."""
    names = list(secrets)
    needs = {"Python": sys.executable, "the temporary folder": tempfile.gettempdir()}
    paths = [str(secrets[n]) for n in names]
    frame = as_user(user, lambda: _reach(paths, list(needs.values())), 2**16)
    flags = _wire.decode(memoryview(frame)[12:])
    for name, flag in zip(names, flags):
        if flag:
            raise ValueError(
                f"--user {user}: {name} {secrets[name]} is readable by {user}; make it readable "
                f"by root only (e.g. chmod -R go-rwx on it or a folder above it)"
            )
    for (name, path), flag in zip(needs.items(), flags[len(names) :]):
        if not flag:
            raise ValueError(f"--user {user}: {user} cannot reach {name} at {path}")


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into `GradeInterrupted` (once: while the grade winds
    down, more of them are ignored). Only in the main thread; elsewhere, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    numbers = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def stop(number: int, frame: object) -> None:
        for n in numbers:
            signal.signal(n, signal.SIG_IGN)
        raise GradeInterrupted(number)

    before = {n: signal.signal(n, stop) for n in numbers}
    try:
        yield
    finally:
        for n, handler in before.items():
            signal.signal(n, handler)


def total_timeout(timeout: float, runs: int, total: float | None) -> float:
    """The whole grade's limit: `total`, else every child's own limit plus `SLACK`."""
    return total if total is not None else timeout * runs + SLACK


def containment(user: str | None) -> str:
    """One line for the report: who ran the student's code, and within which walls."""
    who = f"as {user}" if user is not None else "as this grader's own user"
    abi = _landlock.abi()
    if abi:
        walls = f"Landlock ABI {abi}: own folder only, no other grade"
        walls += ", no signals out" if abi >= 6 else " (signals not scoped)"
    else:
        walls = "no Landlock: it could read what that user reads"
    if user is None and os.geteuid() != 0 and not abi:
        walls += "; a self-check, not a grade"
    return f"the student's code ran {who} ({walls})"
