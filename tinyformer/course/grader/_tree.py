"""The tree a grade runs: a pristine copy of the release with only the student's files laid over.

The copy is made from the running tinyformer (the instructor's tree, or an installed release):
its package, and its `kernels/` folder for an assignment with kernel checks only (so that no
other task can call the library's own kernels), without the kernels of the assignment's own
primitives, as its release leaves them out. Every source is stripped as a release strips
it: the assignment's solution regions become stubs and hidden-test regions go. Then each of the
assignment's student files (`Assignment.files`) is copied from the submission: at its path in
the submission, or at the top of it (a Gradescope upload of single files). Nothing else of the
submission is read, and those files are read as the student could read them
(`read_submission`): by the grading user (never by root), one path component at a time with
`O_NOFOLLOW`, regular files only, each under `MAX_FILE_BYTES`. A symbolic link anywhere on the
way (`submission/tinyformer` pointing at the instructor's package), a FIFO or a device, or an
oversized file refuses the submission with `SubmissionError`, naming the file.

`deps_folder` makes the folder of the third-party packages the child may import: links to
NumPy's (and, for kernels, Numba's and llvmlite's) package folders, so that the child's
`sys.path` holds no site-packages folder and no editable-install finder naming the
instructor's checkout.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import py_compile
import shutil
import stat
from pathlib import Path

import numpy as np

from tinyformer.course.definition import Assignment, due
from tinyformer.course.files import withheld_kernels
from tinyformer.course.grader import _wire
from tinyformer.course.grader._sandbox import as_user
from tinyformer.course.markers import MarkerError, strip_source, syntax_of

__all__ = [
    "MAX_FILE_BYTES", "SubmissionError", "build_tree", "compile_library", "deps_folder",
    "kernels_source", "package_source", "read_submission", "readable",
]  # fmt: skip

SKIPPED = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
THIRD_PARTY = ("numpy", "numpy.libs")
KERNEL_THIRD_PARTY = ("numba", "llvmlite")
MAX_FILE_BYTES = 2**20  # a student file; the largest solution file is about 10 kB
HASHED = py_compile.PycInvalidationMode.CHECKED_HASH


class SubmissionError(ValueError):
    """A submission the grader will not read (a link, not a regular file, too large)."""


def package_source() -> Path:
    """The folder of the running tinyformer package."""
    spec = importlib.util.find_spec("tinyformer")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).resolve().parent


def kernels_source() -> Path | None:
    """The running tinyformer's kernels: `kernels/` beside the package in a checkout, or
    `tinyformer/kernels` in an installed copy."""
    spec = importlib.util.find_spec("tinyformer.kernels")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent


def _stub(a: Assignment):
    def message(region) -> str:
        if region.assignment not in (None, a.name):
            return f"{region.assignment}: not yet due"
        return f"{a.name}: not in the submission — see {a.readme or 'the assignment'}"

    return message


def _not_due(a: Assignment):
    """(region, its owner) -> whether the tree to grade `a` stubs it: `a`'s regions (the
    student's files replace them) and every later assignment's, whose solutions the student's
    code could otherwise read and print into its own feedback (as a release of `a` does)."""
    earlier = set(due(a.name))

    def stub(region, owner: str | None) -> bool:
        return owner not in earlier

    return stub


def _copy_stripped(src: Path, dst: Path, rel: str, a: Assignment) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    syntax = syntax_of(Path(rel))
    if syntax is None:
        shutil.copyfile(src, dst)
        return
    text = src.read_text(encoding="utf-8")
    if "### " not in text:
        shutil.copyfile(src, dst)
        return
    try:
        new, _ = strip_source(text, a.name, _stub(a), where=rel, syntax=syntax, stub=_not_due(a))
    except MarkerError as err:
        raise ValueError(f"cannot make a release of {rel} to grade in: {err}") from None
    dst.write_text(new, encoding="utf-8", newline="")


def _copy_folder(src: Path, dst: Path, prefix: str, a: Assignment, skip: set[str]) -> None:
    for folder, dirs, names in os.walk(src):
        here = Path(folder)
        dirs[:] = [d for d in sorted(dirs) if d not in SKIPPED and here / d not in skip]
        for name in names:
            if name.endswith((".pyc", ".so", ".nbi", ".nbc")) or here / name in skip:
                continue
            rel = (here / name).relative_to(src)
            _copy_stripped(here / name, dst / rel, f"{prefix}/{rel.as_posix()}", a)


def _open_beneath(top: int, parts: list[str]) -> int:
    """The fd of the regular file `parts` below the folder fd `top`, opened component by
    component without following any link. FileNotFoundError if a component is missing;
    SubmissionError (with what is wrong) otherwise."""
    fd = os.dup(top)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            flags |= os.O_NONBLOCK if last else os.O_DIRECTORY  # a FIFO must not block
            try:
                found = os.open(part, flags, dir_fd=fd)
            except OSError as err:
                if err.errno == errno.ENOENT:
                    raise FileNotFoundError(part) from None
                raise SubmissionError(_why(fd, part, last, err)) from None
            os.close(fd)
            fd = found
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SubmissionError("is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise SubmissionError(f"is {info.st_size} bytes, over the limit of {MAX_FILE_BYTES}")
        return fd
    except BaseException:
        os.close(fd)
        raise


def _why(folder: int, part: str, last: bool, err: OSError) -> str:
    try:
        mode = os.stat(part, dir_fd=folder, follow_symlinks=False).st_mode
    except OSError:
        mode = 0
    if stat.S_ISLNK(mode):
        return f"{part!r} is a symbolic link (links are not followed)"
    if not last and mode and not stat.S_ISDIR(mode):
        return f"{part!r} is not a folder"
    if err.errno == errno.EACCES:
        return f"{part!r} cannot be read by the grading user"
    return f"{part!r}: {os.strerror(err.errno or 0)}"


def _read(fd: int) -> bytes:
    chunks, size = [], 0
    while chunk := os.read(fd, 1 << 16):
        size += len(chunk)
        if size > MAX_FILE_BYTES:  # grew since fstat
            raise SubmissionError(f"is over the limit of {MAX_FILE_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _read_files(submission: Path, files: tuple[str, ...]) -> bytes:
    """Read the student files (as whoever runs this); the answer as a `_wire` frame:
    {rel: ["found", bytes as uint8] | ["refused", why] | ["missing"]}."""
    answer: dict[str, list] = {}
    try:
        top = os.open(submission, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        why = "the submission folder cannot be read by the grading user"
        why += f" ({os.strerror(err.errno or 0)})"
        return _wire.encode({rel: ["refused", why] for rel in files})
    try:
        for rel in files:
            answer[rel] = ["missing"]
            for parts in (rel.split("/"), [rel.split("/")[-1]]):
                try:
                    fd = _open_beneath(top, parts)
                except FileNotFoundError:
                    continue
                except SubmissionError as err:
                    answer[rel] = ["refused", f"{'/'.join(parts)}: {err}"]
                    break
                try:
                    data = _read(fd)
                except (SubmissionError, OSError) as err:
                    answer[rel] = ["refused", f"{'/'.join(parts)}: {err}"]
                    break
                finally:
                    os.close(fd)
                answer[rel] = ["found", np.frombuffer(data, np.uint8)]
                break
    finally:
        os.close(top)
    return _wire.encode(answer)


def read_submission(
    submission: Path, files: tuple[str, ...], user: str | None = None
) -> dict[str, bytes]:
    """The student files `files` of `submission` that it holds, read by `user` (None: this
    process's user).

    Raises:
        SubmissionError: a file is a link or under one, not a regular file, or too large.
    """
    limit = len(files) * (MAX_FILE_BYTES + 4096) + 2**16
    frame = as_user(user, lambda: _read_files(submission, files), limit)
    answer = _wire.decode(memoryview(frame)[12:]) if len(frame) > 12 else None
    if not isinstance(answer, dict):
        raise SubmissionError("the submission could not be read")
    found, refused = {}, []
    for rel in files:
        entry = answer.get(rel) or ["missing"]
        if entry[0] == "found":
            found[rel] = bytes(entry[1])
        elif entry[0] == "refused":
            refused.append(f"  {entry[1]}")
    if refused:
        raise SubmissionError("the submission holds files the grader will not read:\n" +
                              "\n".join(refused))  # fmt: skip
    return found


def build_tree(a: Assignment, dest: Path, files: dict[str, bytes], kernels: bool) -> list[str]:
    """Write the tree to grade `a` to `dest`, with the student files `files` (their bytes by
    path, from `read_submission`); return the student files missing from `files`."""
    package, kernel_dir = package_source(), kernels_source()
    inner = {kernel_dir} if kernel_dir is not None else set()
    _copy_folder(package, dest / "tinyformer", "tinyformer", a, inner)
    if kernels and kernel_dir is not None:
        # The library's kernels of this assignment's own primitives (A5's softmax) are its
        # answer: they stay out, as they stay out of its release. (The tree keeps the earlier
        # assignments' solutions, and so their kernels.)
        rels = [
            Path("kernels") / f.relative_to(kernel_dir)
            for f in kernel_dir.rglob("*")
            if f.is_file() and not SKIPPED & set(f.parts)
        ]
        withheld = {
            kernel_dir.parent / f
            for f in withheld_kernels(kernel_dir.parent, rels, a.name, carry_solutions=True)
        }
        _copy_folder(kernel_dir, dest / "kernels", "kernels", a, withheld)
    missing = []
    for rel in a.files:
        if rel not in files:
            missing.append(rel)
            continue
        if rel.startswith("kernels/") and not kernels:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        target.write_bytes(files[rel])
    return missing


# A source's SHA-256 -> its compiled module: each grade copies in what an earlier grade of this
# process compiled (the test suite grades hundreds of trees of the same library).
_COMPILED: dict[str, bytes] = {}


def compile_library(a: Assignment, dest: Path) -> None:
    """Byte-compile the tree's own modules, never the student's files: every child imports the
    library, and the tree is a fresh copy its children cannot write to, so each would otherwise
    compile it from source (about a third of a child's start). Compiling runs none of the code.
    The files are hash-checked (Python compares each with its source's hash when it imports
    it, whatever the file times), so one compile serves every later grade of this process."""
    student = {dest / rel for rel in a.files}
    for path in sorted(dest.rglob("*.py")):
        if path in student:
            continue
        key = hashlib.sha256(path.read_bytes()).hexdigest()
        compiled = Path(importlib.util.cache_from_source(str(path)))
        if key in _COMPILED:
            compiled.parent.mkdir(exist_ok=True)
            compiled.write_bytes(_COMPILED[key])
        elif py_compile.compile(str(path), str(compiled), quiet=2, invalidation_mode=HASHED):
            _COMPILED[key] = compiled.read_bytes()  # (one that does not compile: the child says)


def readable(folder: Path) -> None:
    """Make `folder`'s tree readable by the grading user whatever the grader's umask (it sits
    in the grade's 0700 room, which no one else can enter)."""
    for here, _dirs, names in os.walk(folder):
        os.chmod(here, 0o755)
        for name in names:
            path = os.path.join(here, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)


def deps_folder(dest: Path, kernels: bool) -> Path:
    """A folder of links to the third-party packages the child imports."""
    dest.mkdir(parents=True, exist_ok=True)
    names = THIRD_PARTY + (KERNEL_THIRD_PARTY if kernels else ())
    for name in names:
        spec = importlib.util.find_spec(name.split(".")[0])
        if spec is None or spec.origin is None:
            continue
        site = Path(spec.origin).resolve().parent.parent
        if (site / name).exists():
            (dest / name).symlink_to(site / name)
    return dest
