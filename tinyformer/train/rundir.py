"""A training run's folder, owned by one run at a time.

Three ways to lose work, and what stops each:

- Two runs on one folder would overwrite each other's checkpoint and log. A run holds a lock
  on `<out_dir>/.lock` (an OS file lock, released by the kernel if the process dies, so a
  killed run never leaves the folder locked); the file names the owner's pid, host and
  command, for the message that a second run gets.
- A new run pointed at a folder holding a trained run's checkpoint would replace it at its
  first evaluation. It is refused unless the user says `--resume` or `--overwrite`.
- A kill during a save leaves the writer's temporary file (`.ckpt.npz.<pid>.*.tmp`): the next
  run in that folder removes those whose process is gone.

Under data parallel, rank 0 claims the folder and the other ranks wait until it has; they never
write. The distributed wing says so by setting `RANKS` (as it fills `loop.RANKS`), so this
module knows nothing of process groups.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from tinyformer.fileio import check_writable, stale_temporary_files

__all__ = ["RunFolderBusy", "check_out_dir", "claim_out_dir"]

LOCK = ".lock"


class Ranks(Protocol):
    """What claiming a folder needs of a data parallel run's process group."""

    def is_rank_zero(self) -> bool: ...

    def barrier(self) -> None: ...


# The ranks of the data parallel run this process is part of: set by
# `tinyformer.distributed.training` when a launcher started several; None in one process.
RANKS: Ranks | None = None
CHECKPOINT = "ckpt.npz"


class RunFolderBusy(ValueError):
    """Another run holds the folder, or it holds a checkpoint that this run would replace."""


def check_out_dir(out_dir: str | os.PathLike) -> None:
    """Refuse an output folder that cannot be made or written, before any work: the first write
    comes only after the data is loaded and the first evaluation is done."""
    try:
        check_writable(out_dir)
    except OSError as e:
        where = f"{e.strerror}: {e.filename}" if e.filename else str(e)
        raise ValueError(f"--out-dir {out_dir}: cannot write there ({where})") from None


def _try_lock(fd: int) -> bool:
    """An exclusive, non-blocking lock on the open file `fd`; False if another process has it."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _owner(path: Path) -> str:
    """Who the lock file says holds it, in words."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(owner["started"]))
        return f"pid {owner['pid']} on {owner['host']} (`{owner['command']}`, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _acquire(folder: Path) -> int:
    """Lock `folder` for this process; returns the lock file's descriptor."""
    path = folder / LOCK
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            os.close(fd)
            raise RunFolderBusy(
                f"--out-dir {folder} is in use by {_owner(path)}: two runs in one folder would "
                f"overwrite each other's checkpoints. Wait for it, stop it, or choose another "
                f"--out-dir"
            )
        # The holder before us may have removed the file between our open and our lock: then
        # we locked a file nobody else will see, and must try again on the one at `path`.
        with contextlib.suppress(FileNotFoundError):
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        os.close(fd)
    if os.fstat(fd).st_size:  # a lock file nobody holds: a killed run's, or a copied folder's
        print(f"note: {path} names {_owner(path)}, which no longer holds it; taking it over")
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join(["tinyformer", *sys.argv[1:]]) if sys.argv else "python",
        "started": time.time(),
    }
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(owner).encode())
    return fd


def _refuse_to_replace(folder: Path, resume: bool, overwrite: bool) -> None:
    if resume or overwrite:
        return
    found = sorted(p for p in (folder / CHECKPOINT, *folder.glob(f"*/{CHECKPOINT}")) if p.exists())
    if found:
        raise RunFolderBusy(
            f"--out-dir {folder} already holds a run ({found[0]}): a new run would replace it. "
            f"Continue it with --resume, pass --overwrite to start over there, or choose "
            f"another --out-dir"
        )


@contextlib.contextmanager
def claim_out_dir(
    out_dir: str | os.PathLike, *, resume: bool = False, overwrite: bool = False
) -> Iterator[Path]:
    """Hold `out_dir` for the body of the `with`: check that it can be written, lock it, refuse
    to replace a run's checkpoint unless resuming or overwriting, and clear the temporary files
    that killed writers left there (in the folder and its subfolders' run folders)."""
    ranks = RANKS
    if ranks is not None and not ranks.is_rank_zero():  # rank 0 holds it, the others never write
        ranks.barrier()
        yield Path(out_dir)
        return
    check_out_dir(out_dir)
    folder = Path(out_dir)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    folder.mkdir(parents=True, exist_ok=True)
    fd = _acquire(folder)
    try:
        _refuse_to_replace(folder, resume, overwrite)
        for stale in (*stale_temporary_files(folder), *stale_temporary_files(folder, "*/")):
            stale.unlink(missing_ok=True)
        if ranks is not None:
            ranks.barrier()  # the other ranks start once the folder is claimed
        yield folder
    finally:
        # Remove the file before unlocking: a run that opens it in between retries (_acquire).
        with contextlib.suppress(OSError):
            (folder / LOCK).unlink()
        os.close(fd)
        for path in made:  # a run that stopped before writing anything leaves no folders
            with contextlib.suppress(OSError):
                path.rmdir()
