"""The grading salt: the secret from which the grader draws samples no student has seen.

Real grades are computed in the instructor's tree, on samples drawn from seeds derived from a
secret salt: `seed(salt, "A2", "A2.1", "softmax", 3)` is the first 63 bits of a SHA-256 of the
salt and the names. The salt comes from `--secret FILE` (`grade(..., secret=PATH)`), else from
the file `grading-secret` at the root of the instructor's tree (beside `assignments/`),
created on first use with `secrets.token_hex(32)`, readable by its owner only. It is in
`.gitignore`, never in a release, and the autograder zip carries a copy.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
from pathlib import Path

__all__ = ["FILENAME", "default_path", "read_secret", "seed"]

FILENAME = "grading-secret"
MIN_LENGTH = 16  # characters: a salt shorter than this could be guessed


def default_path() -> Path:
    """`grading-secret` at the root of the running tinyformer's tree."""
    from tinyformer.course.grader._tree import package_source

    return package_source().parent / FILENAME


def _create(path: Path) -> None:
    """Write a fresh salt to `path` (mode 0600) unless a file is already there: the salt is
    linked into place, so two first grades at once agree on one salt."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{FILENAME}.")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another grade made it first: use theirs
    finally:
        os.unlink(tmp)


def read_secret(path: str | os.PathLike | None = None) -> bytes:
    """The salt in `path` (or the instructor tree's `grading-secret`, made if missing).

    Raises:
        ValueError: the file is missing (when named), unreadable or too short.
    """
    named = path is not None
    path = Path(path) if named else default_path()
    if not named and not path.exists():
        try:
            _create(path)
        except OSError as err:
            raise ValueError(f"cannot create the grading secret {path}: {err}") from None
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"--secret: cannot read the grading secret {path}: {err}") from None
    if len(text) < MIN_LENGTH:
        raise ValueError(f"--secret: {path} holds {len(text)} characters, need {MIN_LENGTH}+")
    return text.encode("ascii")


def seed(salt: bytes, *parts: object) -> int:
    """A seed for `RandomDraw` from the salt and the names of what is drawn."""
    h = hashlib.sha256(salt)
    for p in parts:
        h.update(b"\x00" + str(p).encode("utf-8"))
    return int.from_bytes(h.digest()[:8], "little") >> 1
