"""`tinyformer assignment sync --from OLD --to NEW`: carry a student's code into a new release.

As minitorch's module sync does, the student's own code of the earlier assignments moves into
the next release, so that the library they build runs on their work. A release writes every
stub between `### BEGIN YOUR CODE TAG note` and `### END YOUR CODE` lines
(`tinyformer.course.release`); sync finds those regions in each file of NEW, and for each one
of an assignment already due when NEW was released (NEW's `assignments/RELEASE.json`), or a
tutorial exercise (untagged), replaces its body with the body of the same region in the same
file of OLD (matched by tag and note, in order). NEW's own assignment and later ones are never
touched. The notebooks of earlier assignments, which a release does not ship, are copied from
OLD.

A file whose markers the student removed or broke in OLD is reported and left as released.
Each file is rewritten atomically.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tinyformer.course.definition import COURSE
from tinyformer.course.markers import MarkerError, Region, find_regions, syntax_of
from tinyformer.course.release import HANDOUTS, MANIFEST
from tinyformer.fileio import atomic_write

__all__ = ["Sync", "manifest", "sync"]

_SUFFIXES = (".py", ".cu", ".cuh")


@dataclass
class Sync:
    """What a sync did."""

    source: Path
    target: Path
    assignment: str
    regions: Counter = field(default_factory=Counter)  # tag (or "tutorial") -> regions changed
    files: list[str] = field(default_factory=list)  # files rewritten or copied
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        copied = ", ".join(f"{tag} x{n}" for tag, n in sorted(self.regions.items())) or "none"
        out = [
            f"synced {self.source} -> {self.target} ({self.assignment}'s release): "
            f"{len(self.files)} files; regions: {copied}"
        ]
        out += [f"  not synced: {p}" for p in self.problems]
        return out


def manifest(tree: str | os.PathLike) -> dict:
    """The release manifest of `tree`; a ValueError if `tree` is not a release."""
    path = Path(tree) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if (Path(tree) / "course" / "RELEASE.json").is_file():  # the handouts' folder before
            raise ValueError(
                f"{tree} is a release from before the handouts moved to {HANDOUTS}/: rename its "
                f"course/ folder to {HANDOUTS}/ (git mv course {HANDOUTS}), then sync again"
            ) from None
        raise ValueError(
            f"{tree} is not an assignment release (no {MANIFEST}): give the folders written by "
            "`tinyformer assignment release`"
        ) from None


def _key(region: Region) -> tuple[str | None, str]:
    return region.tag, region.note


def _yours(text: str, where: str, syntax) -> list[Region]:
    lines = text.splitlines(keepends=True)
    return [r for r in find_regions(lines, where, syntax) if r.kind == "YOUR CODE"]


def _merge(new: str, old: str, where: str, due: set[str], report: Sync) -> str | None:
    """`new` with its due regions' bodies taken from `old`; None when nothing changes."""
    syntax = syntax_of(where)
    ours = _yours(new, where, syntax)
    if not ours:
        return None
    try:
        theirs = _yours(old, where, syntax)
    except MarkerError as err:
        report.problems.append(f"{err} (in {report.source}): left as released")
        return None
    by_key: dict[tuple[str | None, str], list[Region]] = {}
    for r in theirs:
        by_key.setdefault(_key(r), []).append(r)
    new_lines, old_lines = new.splitlines(keepends=True), old.splitlines(keepends=True)
    out, last, seen, changed = [], 0, Counter(), False
    for r in ours:
        if r.assignment is not None and r.assignment not in due:
            continue
        n = seen[_key(r)]
        seen[_key(r)] += 1
        matches = by_key.get(_key(r), [])
        if n >= len(matches):
            report.problems.append(f"{where}:{r.begin + 1}: no {r.tag or 'exercise'} region there")
            continue
        o = matches[n]
        if old_lines[o.begin + 1 : o.end] == new_lines[r.begin + 1 : r.end]:
            continue  # still the stub, or already the same code
        out += new_lines[last : r.begin + 1] + old_lines[o.begin + 1 : o.end]
        last = r.end
        report.regions[r.tag or "tutorial"] += 1
        changed = True
    if not changed:
        return None
    return "".join(out + new_lines[last:])


def sync(source: str | os.PathLike, target: str | os.PathLike) -> Sync:
    """Carry the student's code of the assignments due at `target` from `source` into it.

    Raises:
        ValueError: either folder is not a release, or both are the same folder.
    """
    source, target = Path(source).resolve(), Path(target).resolve()
    if source == target:
        raise ValueError(f"--from and --to are the same folder ({source})")
    manifest(source)
    meta = manifest(target)
    due = set(meta["due"])
    report = Sync(source, target, meta["assignment"])
    for path in sorted(target.rglob("*")):
        rel = path.relative_to(target)
        if path.suffix not in _SUFFIXES or not path.is_file() or ".venv" in rel.parts:
            continue
        old_path = source / rel
        if not old_path.is_file():
            continue
        new = path.read_text(encoding="utf-8")
        if "### BEGIN YOUR CODE" not in new:
            continue
        merged = _merge(new, old_path.read_text(encoding="utf-8"), rel.as_posix(), due, report)
        if merged is not None and merged != new:
            atomic_write(path, lambda f, text=merged: f.write(text), mode="w")
            report.files.append(rel.as_posix())
    for name in due:  # the earlier assignments' notebooks, which releases do not ship
        for notebook in COURSE[name].notebooks:
            if (source / notebook).is_file() and not (target / notebook).exists():
                shutil.copy2(source / notebook, target / notebook)
                report.files.append(notebook)
    return report
