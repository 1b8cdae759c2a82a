"""Atomic file writes: everything tinyformer saves (checkpoints, logs, charts, tokenizers,
downloads) goes to a temporary file beside the target, is flushed to disk, and is renamed over
the target, so a reader never sees half a file and a crash never destroys the previous one."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_write", "check_writable", "enable_writes", "save_figure", "save_json", "save_text",
    "stale_temporary_files",
]  # fmt: skip

TEMPORARY_SUFFIX = ".tmp"
# False on ranks 1..N-1 of a data parallel `tinyformer train` (set by
# tinyformer.distributed.training): rank 0 writes the run's files for every rank.
_writes_enabled = True


def enable_writes(enabled: bool) -> None:
    """Let this process write files through this module, or make every write a no-op."""
    global _writes_enabled
    _writes_enabled = enabled


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None], mode: str = "w") -> None:
    """Call `write(file)` on a temporary file opened in `mode`, then rename it to `path`. An
    OSError names `path`, never the temporary file (which is gone by then)."""
    if not _writes_enabled:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as err:  # a file where a folder on the way should be
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from err
    # The writer's pid in the name tells a later run which leftovers are a killed writer's.
    prefix = f".{path.name}.{os.getpid()}."
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=TEMPORARY_SUFFIX)
    except OSError as err:  # a read-only folder or disk: it names the temporary file
        raise _naming(err, path) from err
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.filename in (None, tmp):
            raise _naming(err, path) from err
        raise


def _naming(err: OSError, path: Path) -> OSError:
    """`err` with `path` as its file: a write or fsync that fails ("No space left on device")
    names no file, and one that fails on the temporary file (a rename over a folder, a
    read-only folder) names a hidden file the user never asked for; both leave a user with
    several outputs guessing which one failed."""
    if err.errno is None:
        return OSError(f"cannot write {path}: {err}")
    return OSError(err.errno, err.strerror, str(path))  # OSError picks the errno's subclass


def check_writable(folder: str | os.PathLike) -> None:
    """Raise the OSError that writing a file in `folder` would raise, so that a command can
    refuse it before any work. Trying is the only sure test (permissions say nothing for root,
    or on a read-only mount). Makes nothing: the folders it creates are removed again."""
    path = Path(folder).absolute()
    missing = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except FileExistsError as err:  # `path` is a file: "File exists" would not say what is wrong
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path)) from err
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()


def save_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write(path, lambda f: json.dump(data, f, indent=2, ensure_ascii=False))


def save_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda f: f.write(text))


def save_figure(path: str | os.PathLike, fig: Any, dpi: int = 110) -> None:
    """Save a matplotlib figure as PNG, atomically."""
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi), mode="wb")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):  # someone else's process, or no way to tell: keep it
        return True
    return True


def stale_temporary_files(folder: str | os.PathLike, under: str = "") -> list[Path]:
    """The temporary files that `atomic_write` left in `folder` (or, with `under="*/"`, in its
    subfolders) when its process was killed: those whose writer is no longer running, and
    those from before writers put their pid in the name."""
    stale = []
    for path in Path(folder).glob(f"{under}.*{TEMPORARY_SUFFIX}"):
        parts = path.name.split(".")  # "", name..., pid, random + suffix
        pid = parts[-3] if len(parts) >= 4 else ""
        if not (pid.isdigit() and _running(int(pid))):
            stale.append(path)
    return stale
