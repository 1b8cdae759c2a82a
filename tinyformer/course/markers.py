"""Solution and hidden-test markers, with nbgrader's syntax, and the stripping that releases them.

A region is a run of lines between a BEGIN and an END marker line, each a comment alone on its
line: `### BEGIN SOLUTION A2.3 backward` ... `### END SOLUTION` around an answer (it becomes a
stub in A2's release), `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` around
instructor-only tests (removed from every release). The word after the marker is the region's
tag: a task ("A2.3") or an assignment ("A2"); nbgrader ignores anything after the marker, so the
tagged files still work with nbgrader. What follows the tag is a note for the stub's message
("backward"). An untagged solution region belongs to the assignment whose notebook holds it;
elsewhere (e.g. a tutorial's exercise) it belongs to no assignment and is never stubbed.

Stripping for assignment NAME replaces each of NAME's solution regions, markers included, with
one line at the BEGIN marker's indentation,
`raise NotImplementedError("A2.3: layer_norm backward — see docs/ops/layers.md")`,
removes every hidden-test region, and leaves other assignments' regions (and their markers) as
they are. Regions do not nest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MarkerError", "Region", "find_regions", "strip_notebook", "strip_source"]

_MARKER = re.compile(
    r"^(?P<indent>[ \t]*)### (?P<edge>BEGIN|END) (?P<kind>SOLUTION|HIDDEN TESTS)"
    r"(?:[ \t]+(?P<tag>[A-Z]+[0-9]+(?:\.[0-9]+)?)\b)?(?P<note>[^\n]*)$"
)


class MarkerError(ValueError):
    """Markers that do not pair up, or a region that cannot be released."""


@dataclass(frozen=True)
class Region:
    """One marked region: lines `begin` to `end` (0-based, both marker lines included)."""

    kind: str  # "SOLUTION" or "HIDDEN TESTS"
    tag: str | None  # "A2.3", "A2" or None
    note: str  # text after the tag, e.g. "backward"
    begin: int
    end: int
    indent: str

    @property
    def assignment(self) -> str | None:
        return None if self.tag is None else self.tag.split(".")[0]


def find_regions(lines: list[str], where: str) -> list[Region]:
    """The regions in `lines`, in order; `where` names the file in errors."""
    regions, open_at = [], None
    for i, line in enumerate(lines):
        m = _MARKER.match(line.rstrip("\r\n"))
        if m is None:
            continue
        if m["edge"] == "BEGIN":
            if open_at is not None:
                raise MarkerError(
                    f"{where}:{i + 1}: BEGIN {m['kind']} inside the region opened on line "
                    f"{open_at[0] + 1}; regions do not nest"
                )
            open_at = (i, m)
            continue
        if open_at is None or open_at[1]["kind"] != m["kind"]:
            raise MarkerError(f"{where}:{i + 1}: END {m['kind']} without its BEGIN")
        begin, b = open_at
        regions.append(Region(b["kind"], b["tag"], b["note"].strip(), begin, i, b["indent"]))
        open_at = None
    if open_at is not None:
        raise MarkerError(f"{where}:{open_at[0] + 1}: BEGIN {open_at[1]['kind']} is never ended")
    return regions


def strip_source(
    text: str,
    assignment: str,
    message: Callable[[Region], str],
    *,
    where: str,
    owner: str | None = None,
) -> tuple[str, list[Region]]:
    """`text` as released for `assignment`, and the solution regions that became stubs.

    Args:
        text: a Python source (a module, or a jupytext notebook's percent-format source).
        assignment: the assignment being released, e.g. "A2".
        message: the NotImplementedError message for a stubbed region.
        where: the file's name, for errors.
        owner: the assignment this file is a notebook of: its untagged regions belong to it
            (in other files they belong to no assignment, and stay).
    """
    lines = text.splitlines(keepends=True)
    regions = find_regions(lines, where)
    out, stubbed, last = [], [], 0
    for region in regions:
        region_owner = region.assignment or owner
        out += lines[last : region.begin]
        last = region.end + 1
        if region.kind == "HIDDEN TESTS":
            continue
        if region_owner != assignment:
            out += lines[region.begin : last]
            continue
        newline = "\r\n" if lines[region.begin].endswith("\r\n") else "\n"
        text_ = json.dumps(message(region), ensure_ascii=False)  # a valid Python str literal
        out.append(f"{region.indent}raise NotImplementedError({text_}){newline}")
        stubbed.append(region)
    out += lines[last:]
    return "".join(out), stubbed


def strip_notebook(
    text: str,
    assignment: str,
    message: Callable[[Region], str],
    *,
    where: str,
    owner: str | None = None,
) -> tuple[str, list[Region]]:
    """An .ipynb notebook's JSON as released: each code cell stripped as by `strip_source`."""
    notebook = json.loads(text)
    stubbed: list[Region] = []
    for n, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        new, regions = strip_source(
            source, assignment, message, where=f"{where} cell {n}", owner=owner
        )
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            cell["outputs"], cell["execution_count"] = [], None  # outputs would show answers
        stubbed += regions
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", stubbed
