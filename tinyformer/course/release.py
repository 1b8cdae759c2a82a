"""`tinyformer assignment release NAME --out DIR`: the student's version of the library.

A release ships no answer, in any form. Every solution region of every assignment that is not
yet due (NAME's and every later one's, in the order of `COURSE`) is a stub, and so is every
tutorial exercise; the solutions of the assignments already due are stubs too, to be carried
forward from the student's own previous release (`tinyformer assignment sync`), unless the
instructor releases with `carry_solutions` (then those are the instructor's). Library regions
(the library's own copy of an answer, e.g. the engine's topological sort for A1.2) are stubs
until their assignment is due and the instructor's code from then on, since the rest of the
library runs on them. Every stub sits between `### BEGIN YOUR CODE` and `### END YOUR CODE`
lines, which `sync` finds. Hidden-test regions are removed from every release. The library's
kernels of a primitive that a not-yet-due assignment asks for (`Assignment.primitives`: the
Numba and CUDA softmax while A5 is not due) are left out, with the helper modules only they
import (and so are those of the assignments already due, whose regions are stubs too, unless
`carry_solutions`); the registry then runs the reference.

The files are the repository's (`git ls-files`, plus untracked files that git does not ignore:
tracked files may already import them), or, outside a git checkout, the source tree minus build
outputs, caches and virtualenvs. `out/`, `site/` and `.git` are never copied, nor the
grader's secret salt (`grading-secret`), nor the instructor's pages (`docs/instructors.md`,
`docs/course/`, `mkdocs-instructor.yml`), the tests that quote answers (`tests/test_course.py`
and `tests/test_grader_*.py` plant bugs with them, `tests/test_release_answers.py` looks for
them), nor other assignments' notebooks. The grading data (the instructor's forward values, see
`tinyformer.course.grader.data`) goes to `assignments/NAME.grading.npz`, what was released to
`assignments/RELEASE.json`, and a guide for the student to `START_HERE.md`. Python sources,
notebooks and CUDA sources (`.cu`, `.cuh`) are stripped, each with its own comment syntax
(`tinyformer.course.markers`); the answers to the tutorials' questions (`<!-- ANSWER: ... -->`
comments) are taken out of the notebooks' sources and the pages; other files are copied.

The release is built in a temporary folder beside DIR and renamed into place at the end, so an
interrupted release leaves no half-written DIR.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tinyformer.course.definition import COURSE, Assignment, assignment, due, task
from tinyformer.course.files import withheld_kernels
from tinyformer.course.grader import data as grading_data
from tinyformer.course.grader import secret
from tinyformer.course.grader.data import HANDOUTS, data_path
from tinyformer.course.handout import readme_head, start_here
from tinyformer.course.markers import (
    MARKDOWN,
    MarkerError,
    Region,
    find_regions,
    strip_answers,
    strip_notebook,
    strip_source,
    syntax_of,
)

__all__ = [
    "HANDOUTS", "MANIFEST", "SECRET", "Release", "release", "source_root", "strip_page",
    "tree_files",
]  # fmt: skip

# The student handouts (the notebooks, in `HANDOUTS`), and beside them what a release adds for
# the student.
MANIFEST = f"{HANDOUTS}/RELEASE.json"
NOTEBOOK_FOLDERS = ("tutorials", HANDOUTS)  # jupytext sources, whose markdown may hold answers
NEVER_COPIED = {".git", "out", "site", "site-instructor"}
# The assignments' notes and the instructor's page say what the hidden tests probe; the
# course's and the grader's own tests plant bugs by quoting lines of the answers, and the leak
# check quotes the derivations it looks for. (Prefixes: tests/test_grader_* is every file.)
INSTRUCTOR_ONLY = (
    "docs/course/", "docs/instructors.md", "mkdocs-instructor.yml", "tests/test_course.py",
    "tests/test_grader_", "tests/test_release_answers.py",
)  # fmt: skip
# The grader's secret salt (the seeds of the grading samples): in the instructor's tree and the
# autograder zip only. A file of that name is never copied, wherever it is.
SECRET = secret.FILENAME
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
    withheld: list[str] = field(default_factory=list)  # kernel files left out
    where: dict[str, set[str]] = field(default_factory=dict)  # task id -> files of its stubs


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
    return (
        rel.parts[0] in NEVER_COPIED
        or rel.as_posix().startswith(INSTRUCTOR_ONLY)
        or rel.name.startswith(SECRET)
    )


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
            (here / n).relative_to(root)
            for n in sorted(names)
            if not n.endswith(SKIPPED_SUFFIXES) and not _skipped((here / n).relative_to(root))
        ]
    return files


def _after_title(title: str, note: str) -> str:
    """`note` as it follows `title` in a stub's message: without the words that repeat the
    title's end ("ring all-reduce" + "ring all-reduce, in the tutorial" -> ", in the
    tutorial"; "gradient buckets" + "buckets" -> ""), with its leading space when it needs one."""
    words = title.split()
    for n in range(len(words), 0, -1):
        repeated = " ".join(words[-n:])
        rest = note[len(repeated) :]
        if note.lower().startswith(repeated.lower()) and not rest[:1].isalnum():
            note = rest.strip() if not rest.lstrip().startswith(",") else rest.lstrip()
            break
    return note if not note or note.startswith(",") else f" {note}"


def _message(region: Region, owner: str | None) -> str:
    note = f" {region.note}" if region.note else ""
    if region.tag is None or region.tag == region.assignment:
        who = region.tag or owner
        return f"{who + ': ' if who else ''}exercise{note} — replace this line with your code"
    found = task(region.tag)
    if found is None:
        raise MarkerError(f"tag {region.tag} names no task of the course")
    if region.library:
        return (
            f"{found.id}: {found.title} (the library's own copy, released once "
            f"{region.assignment} is due) — see {found.docs}"
        )
    return f"{found.id}: {found.title}{_after_title(found.title, region.note)} — see {found.docs}"


def _policy(a: Assignment, carry_solutions: bool):
    """(region, its owner) -> whether a release of `a` stubs it."""
    earlier = set(due(a.name))

    def stub(region: Region, owner: str | None) -> bool:
        if owner is None:  # a tutorial's exercise
            return True
        if owner not in earlier:  # not yet due (or unknown: the message reports it)
            return True
        return not (region.library or carry_solutions)

    stub.due = earlier  # pages show a derivation once its assignment is due
    return stub


def _copy(src: Path, dst: Path, rel: Path, policy, owner: str | None, report: Release):
    dst.parent.mkdir(parents=True, exist_ok=True)
    syntax = syntax_of(rel)  # None: a file that holds no markers
    answers = _may_answer(rel)
    if syntax is None and not answers:
        shutil.copy2(src, dst)
        return
    try:
        text = src.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        if syntax is not None:
            raise
        shutil.copy2(src, dst)  # a page in another encoding: as it is
        return
    if answers:
        text = strip_answers(text)
    if syntax is None or "### " not in text:  # no marker can be there
        _write(src, dst, text)
        return
    where = rel.as_posix()
    if syntax is MARKDOWN:  # a derivation ships once its assignment is due
        _write(src, dst, strip_page(text, where, frozenset(policy.due)))
        return
    options = dict(where=where, owner=owner, stub=policy, keep_markers=True)

    def message(region: Region) -> str:
        return _message(region, owner)

    try:
        if rel.suffix == ".ipynb":
            new, stubbed = strip_notebook(text, "", message, **options)
        else:
            new, stubbed = strip_source(text, "", message, syntax=syntax, **options)
    except MarkerError as err:
        if str(err).startswith(where):
            raise
        raise MarkerError(f"{where}: {err}") from None
    if rel.suffix == ".py" and stubbed:
        compile(new, where, "exec")  # a region that cuts a block in two is the marker's fault
    if rel.suffix != ".ipynb":
        regions = find_regions(text.splitlines(keepends=True), where, syntax)
        report.hidden_removed += sum(r.kind == "HIDDEN TESTS" for r in regions)
    report.stubbed.update(r.tag or owner or "tutorial" for r in stubbed)
    for r in stubbed:
        report.where.setdefault(r.tag or owner or "tutorial", set()).add(where)
    dst.write_text(new, encoding="utf-8", newline="")
    shutil.copymode(src, dst)


def strip_page(text: str, where: str, shown: frozenset[str] = frozenset()) -> str:
    """A page (markdown) with each derivation that is a task's answer (a solution region,
    `<!-- ### BEGIN SOLUTION A2.1 backward -->`) a quoted line, except those of the
    assignments in `shown` (already due). The students' site shows none (docs/hooks)."""

    def message(region: Region) -> str:
        found = task(region.tag) if region.tag else None
        if found is None:
            return f"{region.tag or 'Exercise'}: {region.note or 'left for you to work out'}"
        what = found.title + _after_title(found.title, region.note)
        return (
            f"**{found.id}** ({what}): working this out is part of assignment {region.assignment}."
        )

    def stub(region: Region, owner: str | None) -> bool:
        return owner not in shown

    return strip_source(text, "", message, where=where, syntax=MARKDOWN, stub=stub)[0]


def _may_answer(rel: Path) -> bool:
    """Whether `rel` may answer a tutorial's question in a comment: a page, or a notebook's
    jupytext source (the library's own sources may quote the comment's syntax)."""
    return rel.suffix == ".md" or rel.suffix == ".py" and rel.parts[0] in NOTEBOOK_FOLDERS


def _write(src: Path, dst: Path, text: str) -> None:
    """`text`, the released `src`, to `dst`: a copy of `src` if the text is the same."""
    if text == src.read_text(encoding="utf-8"):
        shutil.copy2(src, dst)
        return
    dst.write_text(text, encoding="utf-8", newline="")
    shutil.copymode(src, dst)


def _check_out(out: Path, root: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a folder for the release")
    if out.exists() and any(out.iterdir()) and not force:
        raise ValueError(f"{out} is not empty; add --force to replace it")
    if out == root or root in out.parents and out.relative_to(root).parts[0] not in ("out",):
        raise ValueError(f"{out} is inside the source tree {root}; release outside it, or in out/")


def release(
    name: str,
    out: str | os.PathLike,
    *,
    force: bool = False,
    progress: bool = False,
    carry_solutions: bool = False,
) -> Release:
    """Write assignment `name`'s student version to `out`; return a `Release`.

    Args:
        carry_solutions: keep the instructor's solutions of the assignments already due, instead
            of stubs for the student to fill from their own previous release with `sync`.

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
    withheld = withheld_kernels(root, files, a.name, carry_solutions)
    files = [f for f in files if f not in withheld]
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.release-{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    report = Release(out, withheld=sorted(f.as_posix() for f in withheld))
    policy = _policy(a, carry_solutions)
    try:
        for rel in tqdm(files, desc=f"release {a.name}", unit="file", disable=not progress):
            _copy(root / rel, tmp / rel, rel, policy, owners.get(rel.as_posix()), report)
        report.files = len(files)
        unmarked = [t.id for t in a.tasks if not report.stubbed[t.id]]
        if unmarked:
            raise MarkerError(
                f"no solution region is tagged {', '.join(unmarked)} in {root}: mark the "
                "task's code, or release from the instructor's tree"
            )
        grading_data.save(data_path(tmp, a.name), grading_data.compute(a, progress))
        manifest = {
            "assignment": a.name,
            "due": list(due(a.name)),
            "carry_solutions": carry_solutions,
            "withheld": report.withheld,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        (tmp / "START_HERE.md").write_text(
            start_here(a, carry_solutions, report.where), encoding="utf-8"
        )
        readme = tmp / "README.md"
        if readme.is_file():
            readme.write_text(readme_head(a) + readme.read_text("utf-8"), encoding="utf-8")
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
