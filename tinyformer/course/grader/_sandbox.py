"""The grader's child processes: where the student's code runs, and how it is contained.

Each task of a grade gets its own child (`_child.py`), started in a new session with a
wall-clock deadline, an address-space limit, a cap on the size of any file it writes (its
output included), a minimal environment, and optionally another user (`Limits.user`, when the
grader runs as root). It gets a private folder of its own (a random name in the grade's room:
its working folder, HOME and TMPDIR), made afresh for it and removed after it, so that nothing
one child writes there reaches a later one and no name says which task or phase it serves.
Beside it, the grade's one cache (Numba's and the CUDA emulator's builds) is shared by the
grade's children, one submission's, so that its kernels compile once. Where the kernel has
Landlock (`_landlock`), the child may write in those two folders only, read only its tree, its
packages and the system, and signal nobody outside. Its output goes to
an unlinked file the grader keeps open, so no path of the child's can redirect what the grader
reads back. It is told the copy of the release it grades and nothing else.

When the task ends, the child's process group is killed, and so is every process it left
behind: on Linux the grader makes itself a child subreaper, so that an orphan of the child (a
detached grandchild in a session of its own) is re-parented to the grader, which kills it too.
Nothing of the grade is written until that sweep is done.

A child that exits, hangs, crashes or sends something malformed raises `ChildGone`, whose
one-line reason costs its own task only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import resource
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyformer.course.grader import _landlock, _text, _wire

__all__ = ["Child", "ChildGone", "Limits", "as_user", "reaping"]

OUTPUT_BYTES = 16 * 2**20  # the largest file a child may write, its own output included
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """What one task's child may use.

    Attributes:
        timeout: wall-clock seconds for the whole task (start, every check, shutdown).
        memory: bytes of address space (RLIMIT_AS), or None for no limit.
        user: run the child as this user (needs root), or None for the grader's own user.
        deadline: time.monotonic() by which the whole grade must end (`--total-timeout`),
            or None; a task's deadline is the earlier of its own and this one.
    """

    timeout: float
    memory: int | None = 4 * 2**30
    user: str | None = None
    deadline: float | None = None


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


def as_user(user: str | None, fn: Callable[[], bytes], limit: int, timeout: float = 60.0) -> bytes:
    """`fn()`'s bytes, computed in a forked process running as `user` (no extra groups), or
    here when `user` is None: what the grader reads of a submission, it reads as the student.

    Raises:
        RuntimeError: the process failed, sent more than `limit` bytes or ran past `timeout`.
    """
    if user is None:
        return fn()
    entry = pwd.getpwnam(user)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked process: drop to the user, answer, and leave without cleanup
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            data = memoryview(fn())
            while data:
                data = data[os.write(write_end, data[: 1 << 16]) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks, size, deadline, done = [], 0, time.monotonic() + timeout, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                raise RuntimeError(f"reading as {user} took over {timeout:g} s")
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise RuntimeError(f"reading as {user} gave over {limit} bytes")
            chunks.append(chunk)
        done = True
    finally:
        os.close(read_end)
        if not done:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the process reading as {user} failed")
    return b"".join(chunks)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Child:
    """One task's child process: start it, send it requests, and end it with all it started."""

    def __init__(
        self, tree: Path, deps: Path, room: Path, limits: Limits, kernels: bool, spare: set[int]
    ) -> None:
        self.tree, self.deps, self.room, self.limits = tree, deps, room, limits
        self.kernels, self.spare = kernels, spare
        self.process: subprocess.Popen | None = None
        self.fatal: str | None = None
        self.work: Path | None = None
        self.output_file: Any = None
        self.replies: int | None = None
        own = time.monotonic() + limits.timeout
        self.overall = limits.deadline is not None and limits.deadline < own
        self.deadline = limits.deadline if self.overall else own  # type: ignore[assignment]

    def _environment(self, work: Path) -> dict[str, str]:
        return {
            "PATH": os.defpath, "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8",
            "NUMBA_CACHE_DIR": str(self._cache()), "TINYFORMER_CACHE": str(self._cache()),
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        }  # fmt: skip

    def _readable(self, work: Path) -> list[str]:
        """What the child may read: its tree, its packages (the links and what they name),
        its folder, Python's installation and the system folders."""
        found = {str(self.tree), str(self.deps), str(work), str(self._cache())}
        found |= set(_landlock.SYSTEM_FOLDERS)
        found |= {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
        found.add(os.path.dirname(os.path.realpath(sys.executable)))
        for link in self.deps.iterdir():
            found.add(os.path.realpath(link))
        return sorted(found)

    def _limit(self, read: list[str], write: list[str]) -> None:  # in the child, after setuid
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_BYTES, OUTPUT_BYTES))
        if self.limits.memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory, self.limits.memory))
        _landlock.restrict(read, write)

    def _cache(self) -> Path:
        """The grade's one cache: Numba's, and the CUDA emulator's builds (tinyformer's cache
        folder). Its children are one submission's, run one after the other, so sharing it
        lets them compile the kernels once, not once per task; what a child leaves there
        reaches only its own submission's later tasks, and the room, cache included, is
        removed with the grade."""
        return self.room / "cache"

    def _private_folder(self, user: dict[str, Any]) -> Path:
        """A fresh folder with a random name: the child's working folder, HOME and TMPDIR
        (and the grade's cache, made by the first child)."""
        work = self.room / secrets.token_hex(8)
        work.mkdir(mode=0o700)
        folders = [work]
        if not self._cache().is_dir():
            self._cache().mkdir(mode=0o700)
            folders.append(self._cache())
        if user:
            for folder in folders:
                os.chown(folder, user["user"], user["group"], follow_symlinks=False)
        return work

    def start(self) -> None:
        """Start the child and wait for it to load the tree; a tree that does not load sets
        `fatal` (the error, for every check of the task)."""
        user: dict[str, Any] = {}
        if self.limits.user is not None:
            entry = pwd.getpwnam(self.limits.user)
            user = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        self.work = work = self._private_folder(user)
        read, write = self._readable(work), [str(work), str(self._cache())]
        self.output_file = tempfile.TemporaryFile(dir=self.room)  # no path: nothing to swap
        read_end, reply = os.pipe()
        self.replies = read_end
        script = self.tree / "tinyformer" / "course" / "grader" / "_child.py"
        command = [sys.executable, "-I", "-S", str(script), str(self.tree), str(self.deps)]
        command += [str(reply), "1" if self.kernels else "0"]
        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=self.output_file,
                stderr=subprocess.STDOUT, pass_fds=(reply,), cwd=work,
                env=self._environment(work), start_new_session=True,
                preexec_fn=lambda: self._limit(read, write), close_fds=True, **user,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError) as err:  # e.g. the user cannot run Python
            why = getattr(err, "strerror", None) or type(err).__name__  # no path of this machine
            raise ChildGone(f"the grader could not start the code's process ({why})") from None
        finally:
            os.close(reply)
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
        assert self.replies is not None
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
            if self.overall:
                return ChildGone(f"the grade ran past its overall time limit during {during}")
            return ChildGone(f"the code ran past the {self.limits.timeout:g} s time limit "
                             f"during {during}")  # fmt: skip
        if not err.closed:
            return ChildGone(f"the code sent a malformed reply during {during}: "
                             f"{_text.clean(str(err), 300)}")  # fmt: skip
        try:
            status = self.process.wait(timeout=max(0.5, min(5.0, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            return ChildGone(f"the code closed the grader's pipe during {during}")
        if status < 0:
            return ChildGone(f"the code was killed by {_signal_name(-status)} during {during}")
        return ChildGone(f"the code exited (status {status}) during {during}")

    def output(self, limit: int = 2000) -> str:
        """The tail of what the child printed, cleaned, with the grading folder's paths out."""
        if self.output_file is None:
            return ""
        try:
            fd = self.output_file.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, limit, max(0, size - limit))
        except (OSError, ValueError):
            return ""
        text = data.decode("utf-8", errors="replace")
        text = text.replace(str(self.tree) + os.sep, "")
        if self.work is not None:
            text = text.replace(str(self.work), "<work>")
        return _text.clean(text, limit)

    def close(self) -> None:
        """Kill the child's process group and every orphan it left; close the pipes; remove
        its private folder."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
        if self.replies is not None:
            with contextlib.suppress(OSError):
                os.close(self.replies)
            self.replies = None
        _sweep(self.spare)
        if self.output_file is not None:
            self.output_file.close()
            self.output_file = None
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)  # fd-based: follows no link
