"""`tinyformer assignment release NAME --out DIR`: the student's version of the library.

The release is a working copy of the instructor's tree in which NAME's solution regions are
stubs and every hidden-test region is gone; other assignments' solutions stay, so everything
outside NAME still runs. The files are the repository's (`git ls-files`, plus untracked files
that git does not ignore: tracked files may already import them), or, outside a git checkout,
the source tree minus build outputs, caches and virtualenvs. `out/`, `site/` and `.git` are
never copied, nor `docs/course/` (the instructor's notes), nor other assignments' notebooks.
The grading data (the instructor's forward values, see `tinyformer.course.data`) goes to
`course/NAME.grading.npz`. Python sources, notebooks and CUDA sources (`.cu`, `.cuh`) are
stripped, each with its own comment syntax (`tinyformer.course.markers`); other files are copied.

The release is built in a temporary folder beside DIR and renamed into place at the end, so an
interrupted release leaves no half-written DIR.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tinyformer.course import data as grading_data
from tinyformer.course.definition import COURSE, Assignment, assignment, task
from tinyformer.course.markers import (
    MarkerError,
    Region,
    find_regions,
    strip_notebook,
    strip_source,
    syntax_of,
)

__all__ = ["Release", "data_path", "release", "source_root", "tree_files"]

NEVER_COPIED = {".git", "out", "site"}
INSTRUCTOR_ONLY = ("docs/course/",)  # the assignments' notes say what the hidden tests probe
# Outside git: folders of build outputs and caches, skipped wherever they are.
SKIPPED_DIRS = {
    "__pycache__", "build", "dist", "bench-results", "node_modules", ".pytest_cache",
    ".hypothesis", ".ruff_cache", ".ipynb_checkpoints", ".venv", "venv", ".mypy_cache",
}  # fmt: skip
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".nbi", ".nbc", ".so", ".egg-info")


@dataclass
class Release:
    """What a release wrote."""

    out: Path
    files: int = 0
    stubbed: Counter = field(default_factory=Counter)  # task or assignment tag -> regions
    hidden_removed: int = 0
    data: Path | None = None


def data_path(tree: str | os.PathLike, name: str) -> Path:
    """Where a release keeps assignment `name`'s grading data."""
    return Path(tree) / "course" / f"{name}.grading.npz"


def source_root() -> Path:
    """The checkout the running tinyformer comes from (releases are made from it)."""
    import tinyformer

    root = Path(tinyformer.__file__).resolve().parent.parent
    if not any((root / f).is_file() for f in ("setup.py", "pyproject.toml")):
        raise ValueError(
            f"tinyformer runs from {root}, which is not a source checkout; install the "
            "instructor's checkout with `pip install -e .` to release assignments"
        )
    return root


def _skipped(rel: Path) -> bool:
    return rel.parts[0] in NEVER_COPIED or rel.as_posix().startswith(INSTRUCTOR_ONLY)


def tree_files(root: Path) -> list[Path]:
    """The files of the tree at `root` that a release copies, relative to `root`."""
    if (root / ".git").exists():
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, check=True,
        ).stdout.decode("utf-8").split("\0")  # fmt: skip
        # A tracked file deleted in the working tree is listed but absent: nothing to copy.
        files = {Path(p) for p in listed if p and (root / p).is_file()}
        return sorted(p for p in files if not _skipped(p))
    files = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and not d.endswith(".egg-info")
            and not (here / d / "pyvenv.cfg").exists()  # any virtualenv, whatever its name
            and not _skipped((here / d).relative_to(root))
        )
        files += [
            (here / n).relative_to(root) for n in sorted(names) if not n.endswith(SKIPPED_SUFFIXES)
        ]
    return files


def _message(a: Assignment, region: Region) -> str:
    note = f" {region.note}" if region.note else ""
    if region.tag is None or region.tag == a.name:
        return f"{a.name}: exercise{note} — replace this line with your code"
    found = task(region.tag)
    if found is None:
        raise MarkerError(f"tag {region.tag} names no task of {a.name}")
    return f"{found.id}: {found.title}{note} — see {found.docs}"


def _copy(src: Path, dst: Path, rel: Path, a: Assignment, owner: str | None, report: Release):
    dst.parent.mkdir(parents=True, exist_ok=True)
    syntax = syntax_of(rel)  # None: a file that holds no markers
    if syntax is None:
        shutil.copy2(src, dst)
        return
    text = src.read_text(encoding="utf-8")
    if "### " not in text:  # no marker can be there: copy as it is
        shutil.copy2(src, dst)
        return
    where = rel.as_posix()
    message = functools.partial(_message, a)
    try:
        if rel.suffix == ".ipynb":
            new, stubbed = strip_notebook(text, a.name, message, where=where, owner=owner)
        else:
            new, stubbed = strip_source(
                text, a.name, message, where=where, owner=owner, syntax=syntax
            )
    except MarkerError as err:
        if str(err).startswith(where):
            raise
        raise MarkerError(f"{where}: {err}") from None
    if rel.suffix == ".py" and stubbed:
        compile(new, where, "exec")  # a region that cuts a block in two is the marker's fault
    if rel.suffix != ".ipynb":
        regions = find_regions(text.splitlines(keepends=True), where, syntax)
        report.hidden_removed += sum(r.kind == "HIDDEN TESTS" for r in regions)
    report.stubbed.update(r.tag or a.name for r in stubbed)
    dst.write_text(new, encoding="utf-8", newline="")
    shutil.copymode(src, dst)


def _check_out(out: Path, root: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a folder for the release")
    if out.exists() and any(out.iterdir()) and not force:
        raise ValueError(f"{out} is not empty; add --force to replace it")
    if out == root or root in out.parents and out.relative_to(root).parts[0] not in ("out",):
        raise ValueError(f"{out} is inside the source tree {root}; release outside it, or in out/")


def release(name: str, out: str | os.PathLike, *, force: bool = False, progress: bool = False):
    """Write assignment `name`'s student version to `out`; return a `Release`.

    Raises:
        ValueError: unknown assignment, a non-empty `out` without `force`, markers that do not
            pair up or name no task, a task with no solution region in the tree.
    """
    from tqdm import tqdm

    a = assignment(name)
    root = source_root()
    out = Path(out).resolve()
    _check_out(out, root, force)
    owners = {nb: other.name for other in COURSE.values() for nb in other.notebooks}
    files = [f for f in tree_files(root) if owners.get(f.as_posix(), a.name) == a.name]
    missing = [nb for nb in a.notebooks if Path(nb) not in files]
    if missing:
        raise ValueError(f"{a.name}'s notebooks are not in {root}: {', '.join(missing)}")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.release-{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    report = Release(out)
    try:
        for rel in tqdm(files, desc=f"release {a.name}", unit="file", disable=not progress):
            _copy(root / rel, tmp / rel, rel, a, owners.get(rel.as_posix()), report)
        report.files = len(files)
        unmarked = [t.id for t in a.tasks if not report.stubbed[t.id]]
        if unmarked:
            raise MarkerError(
                f"no solution region is tagged {', '.join(unmarked)} in {root}: mark the "
                "task's code, or release from the instructor's tree"
            )
        grading_data.save(data_path(tmp, a.name), grading_data.compute(a, progress))
        _swap(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report.data = data_path(out, a.name)
    return report


def _swap(tmp: Path, out: Path) -> None:
    """Put the finished release at `out`, replacing what was there."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}.tmp"
        out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        if old is not None:
            old.rename(out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
