"""The grader's child processes: where the student's code runs, and how it is contained.

Each task of a grade gets its own child (`_child.py`), started in a new session with a
wall-clock deadline, an address-space limit, a cap on the size of any file it writes (its
output included), a minimal environment, a working folder of its own, and optionally another
user (`Limits.user`, when the grader runs as root). It is told the copy of the release it
grades and nothing else. When the task ends, the child's process group is killed, and so is
every process it left behind: on Linux the grader makes itself a child subreaper, so that an
orphan of the child (a detached grandchild in a session of its own) is re-parented to the
grader, which kills it too. Nothing of the grade is written until that sweep is done.

A child that exits, hangs, crashes or sends something malformed raises `ChildGone`, whose
one-line reason costs its own task only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyformer.course import _wire

__all__ = ["Child", "ChildGone", "Limits", "reaping"]

OUTPUT_BYTES = 16 * 2**20  # the largest file a child may write, its own output included
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """What one task's child may use.

    Attributes:
        timeout: wall-clock seconds for the whole task (start, every check, shutdown).
        memory: bytes of address space (RLIMIT_AS), or None for no limit.
        user: run the child as this user (needs root), or None for the grader's own user.
    """

    timeout: float
    memory: int | None = 4 * 2**30
    user: str | None = None


class ChildGone(Exception):
    """The child stopped answering; the message is one line, e.g. "the code exited (status 0)
    during forward"."""


def _children() -> set[int]:
    """The pids whose parent is this process (Linux /proc; empty elsewhere)."""
    me, found = os.getpid(), set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: fields follow the last ")"
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.add(int(entry))
    return found


def _set_subreaper(on: bool) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def reaping() -> Iterator[set[int]]:
    """While grading: orphans of the children come back to this process (Linux), so that
    `Child.close` can kill them. Yields the children this process had before, never touched."""
    before = _children()
    was_on = _set_subreaper(True)
    try:
        yield before
    finally:
        if was_on:
            _set_subreaper(False)


def _sweep(spare: set[int]) -> None:
    """Kill and reap every child of this process not in `spare`, until none is left."""
    for _ in range(200):
        strays = _children() - spare
        if not strays:
            return
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in strays:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
    raise RuntimeError("the graded code keeps starting processes faster than they are killed")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Child:
    """One task's child process: start it, send it requests, and end it with all it started."""

    def __init__(
        self, tree: Path, deps: Path, work: Path, limits: Limits, kernels: bool, spare: set[int]
    ) -> None:
        self.tree, self.deps, self.work, self.limits = tree, deps, work, limits
        self.kernels, self.spare = kernels, spare
        self.process: subprocess.Popen | None = None
        self.fatal: str | None = None
        self.deadline = time.monotonic() + limits.timeout
        self.output_path = work / "output.txt"

    def _environment(self) -> dict[str, str]:
        return {
            "PATH": os.defpath, "HOME": str(self.work), "TMPDIR": str(self.work),
            # one Numba cache for a grade's children: its kernels compile once, not per task
            "LANG": "C.UTF-8", "NUMBA_CACHE_DIR": str(self.work.parent / "numba-cache"),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        }  # fmt: skip

    def _limit(self) -> None:  # in the child, after fork (and after setuid, if any)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_BYTES, OUTPUT_BYTES))
        if self.limits.memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory, self.limits.memory))

    def start(self) -> None:
        """Start the child and wait for it to load the tree; a tree that does not load sets
        `fatal` (the error, for every check of the task)."""
        self.work.mkdir(parents=True, exist_ok=True)
        cache = self.work.parent / "numba-cache"
        cache.mkdir(exist_ok=True)
        user: dict[str, Any] = {}
        if self.limits.user is not None:
            entry = pwd.getpwnam(self.limits.user)
            user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            for folder in (self.work, cache):
                os.chown(folder, entry.pw_uid, entry.pw_gid)
        read_end, self.reply = os.pipe()
        self.replies = read_end
        script = self.tree / "tinyformer" / "course" / "_child.py"
        command = [sys.executable, "-I", "-S", str(script), str(self.tree), str(self.deps)]
        command += [str(self.reply), "1" if self.kernels else "0"]
        try:
            with open(self.output_path, "wb") as output:
                self.process = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT,
                    pass_fds=(self.reply,), cwd=self.work, env=self._environment(),
                    start_new_session=True, preexec_fn=self._limit, close_fds=True, **user,
                )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as err:  # e.g. the user cannot run Python
            why = getattr(err, "strerror", None) or type(err).__name__  # no path of this machine
            raise ChildGone(f"the grader could not start the code's process ({why})") from None
        finally:
            os.close(self.reply)
        hello = self._receive("loading the code")
        if "fatal" in hello:
            self.fatal = str(hello["fatal"])

    def request(self, message: dict[str, Any], during: str) -> dict[str, Any]:
        """Send `message`; the child's reply. ChildGone if the child cannot answer."""
        if self.process is None or self.process.stdin is None:
            raise ChildGone(f"the code is not running (during {during})")
        try:
            _wire.write_message(self.process.stdin.fileno(), message, self.deadline)
        except _wire.WireError as err:
            raise self._gone(err, during) from None
        return self._receive(during)

    def _receive(self, during: str) -> dict[str, Any]:
        try:
            reply = _wire.read_message(self.replies, self.deadline)
        except _wire.WireError as err:
            raise self._gone(err, during) from None
        if not isinstance(reply, dict):
            raise ChildGone(f"the code sent a malformed reply during {during}")
        return reply

    def _gone(self, err: _wire.WireError, during: str) -> ChildGone:
        assert self.process is not None
        if err.timed_out:
            return ChildGone(f"the code ran past the {self.limits.timeout:g} s time limit "
                             f"during {during}")  # fmt: skip
        if not err.closed:
            return ChildGone(f"the code sent a malformed reply during {during}: {err}")
        try:
            status = self.process.wait(timeout=max(0.5, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            return ChildGone(f"the code closed the grader's pipe during {during}")
        if status < 0:
            return ChildGone(f"the code was killed by {_signal_name(-status)} during {during}")
        return ChildGone(f"the code exited (status {status}) during {during}")

    def output(self, limit: int = 2000) -> str:
        """The tail of what the child printed, with the grading folder's path taken out."""
        try:
            with open(self.output_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - limit))
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return text.replace(str(self.tree) + os.sep, "").replace(str(self.work), "<work>")

    def close(self) -> None:
        """Kill the child's process group and every orphan it left; close the pipes."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
        with contextlib.suppress(OSError):
            os.close(self.replies)
        _sweep(self.spare)
