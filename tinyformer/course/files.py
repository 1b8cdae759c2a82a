"""Which files of a tree hold an assignment's answers: the student's files (`solution_files`)
and the library's kernels that a release, and the tree that grades it, leave out
(`withheld_kernels`)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tinyformer.course.definition import COURSE, Assignment, assignment

__all__ = ["solution_files", "withheld_kernels"]


def solution_files(root: str | os.PathLike, a: Assignment) -> tuple[str, ...]:
    """The files under `root` (a checkout) that hold a solution region of one of `a`'s tasks,
    as paths from `root`, sorted: what `Assignment.files` lists."""
    from tinyformer.course.markers import solution_regions

    root, ids, found = Path(root), {t.id for t in a.tasks} | {a.name}, []
    for folder in ("tinyformer", "kernels"):
        for path in sorted((root / folder).rglob("*")):
            if "__pycache__" in path.parts:
                continue
            # a library region is the library's own copy of an answer, not the student's file
            if any(r.tag in ids and not r.library for r in solution_regions(path)):
                found.append(path.relative_to(root).as_posix())
    return tuple(sorted(found))


_REGISTERS = re.compile(r"""\bkernel\(\s*["']([\w.]+)["']""")
_IMPORTS = re.compile(r"tinyformer\.kernels\.(\w+)\.(_\w+)")


def withheld_kernels(
    root: Path, files: list[Path], name: str, carry_solutions: bool = False
) -> set[Path]:
    """The kernel files (paths from `root`, among `files`) a release of `name` leaves out, and
    so the tree that grades it: those registering a primitive of an assignment whose regions
    the release stubs (every one not yet due, and, unless
    `carry_solutions`, the ones already due too: a student's own code replaces them), their
    `.cu` sources, and the private helpers only they import."""
    names = list(COURSE)
    stubbed = names[names.index(assignment(name).name) :]
    if not carry_solutions:
        stubbed = names
    answers = {p for n in stubbed for p in COURSE[n].primitives}
    sources = {f: (root / f).read_text(encoding="utf-8") for f in files if _is_kernel(f)}
    out = {f for f, text in sources.items() if answers & set(_REGISTERS.findall(text))}
    out |= {f.with_suffix(".cu") for f in out if f.with_suffix(".cu") in sources}
    users: dict[Path, set[Path]] = {}
    for f, text in sources.items():
        for backend, module in _IMPORTS.findall(text):
            users.setdefault(Path("kernels", backend, f"{module}.py"), set()).add(f)
    changed = True
    while changed:  # a helper whose every importer is left out goes too
        extra = {h for h, who in users.items() if h in sources and h not in out and who <= out}
        out |= extra
        changed = bool(extra)
    return out


def _is_kernel(f: Path) -> bool:
    return f.parts[0] == "kernels" and f.suffix in (".py", ".cu") and f.name != "__init__.py"
