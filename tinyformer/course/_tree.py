"""The tree a grade runs: a pristine copy of the release with only the student's files laid over.

The copy is made from the running tinyformer (the instructor's tree, or an installed release):
its package, and its `kernels/` folder for an assignment with kernel checks only (so that no
other task can call the library's own kernels), without the kernels of the assignment's own
primitives, as its release leaves them out. Every source is stripped as a release strips
it: the assignment's solution regions become stubs and hidden-test regions go. Then each of the
assignment's student files (`Assignment.files`) is copied from the submission: at its path in
the submission, or at the top of it (a Gradescope upload of single files). Nothing else of the
submission is read.

`deps_folder` makes the folder of the third-party packages the child may import: links to
NumPy's (and, for kernels, Numba's and llvmlite's) package folders, so that the child's
`sys.path` holds no site-packages folder and no editable-install finder naming the
instructor's checkout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from tinyformer.course.definition import Assignment
from tinyformer.course.markers import MarkerError, strip_source, syntax_of
from tinyformer.course.release import withheld_kernels

__all__ = [
    "build_tree", "deps_folder", "kernels_source", "package_source", "submitted",
]  # fmt: skip

SKIPPED = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
THIRD_PARTY = ("numpy", "numpy.libs")
KERNEL_THIRD_PARTY = ("numba", "llvmlite")


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
        return f"{a.name}: not in the submission — see {a.readme or 'the assignment'}"

    return message


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
        new, _ = strip_source(text, a.name, _stub(a), where=rel, syntax=syntax)
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


def submitted(submission: Path, rel: str) -> Path | None:
    """The submission's copy of the student file `rel`, or None."""
    for candidate in (submission / rel, submission / Path(rel).name):
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def build_tree(a: Assignment, dest: Path, submission: Path, kernels: bool) -> list[str]:
    """Write the tree to grade `a` to `dest`; the student files the submission lacks."""
    package, kernel_dir = package_source(), kernels_source()
    inner = {kernel_dir} if kernel_dir is not None else set()
    _copy_folder(package, dest / "tinyformer", "tinyformer", a, inner)
    if kernels and kernel_dir is not None:
        # The library's kernels of this assignment's own primitives (A5's softmax) are its
        # answer: they stay out, as they stay out of its release. (The tree keeps the earlier
        # assignments' solutions, and so their kernels.)
        files = [
            Path("kernels") / f.relative_to(kernel_dir)
            for f in kernel_dir.rglob("*")
            if f.is_file() and not SKIPPED & set(f.parts)
        ]
        withheld = {
            kernel_dir.parent / f
            for f in withheld_kernels(kernel_dir.parent, files, a.name, carry_solutions=True)
        }
        _copy_folder(kernel_dir, dest / "kernels", "kernels", a, withheld)
    missing = []
    for rel in a.files:
        found = submitted(submission, rel)
        if found is None:
            missing.append(rel)
            continue
        target = dest / rel
        if rel.startswith("kernels/") and not kernels:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(found, target)
    return missing


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
