"""Every tutorial notebook has exercises a release can stub, and questions.

Reads the jupytext sources (no notebook runs): each has at least one solution region inside a
code cell, a markdown cell with an "**Exercise" and one with a "**Question:**"; and, stripped as
a release strips an assignment's notebook, it still compiles, with every solution region turned
into one `raise NotImplementedError(...)` line.

The covered notebooks are `COVERED` below: the sources `make notebooks` runs. To exclude one,
remove it there with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tinyformer.course.markers import Region, find_regions, strip_source

ROOT = Path(__file__).resolve().parent.parent
COVERED = sorted(ROOT.glob("tutorials/[0-9]*.py"))  # what the Makefile's `notebooks` runs
OWNER = "TUTORIAL"  # stand-in assignment: strip every untagged region, as in a release
_CELL = re.compile(r"^# %%(?P<rest>.*)$")


def _cells(lines: list[str]) -> list[tuple[str, int, int]]:
    """(kind, first line, last line + 1) of each jupytext percent cell; kind "code" or
    "markdown". Lines before the first `# %%` (the YAML header) belong to no cell."""
    starts = [(i, m["rest"]) for i, line in enumerate(lines) if (m := _CELL.match(line))]
    cells = []
    for n, (begin, rest) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        kind = "markdown" if re.match(r"\s*\[(markdown|md)\]", rest) else "code"
        cells.append((kind, begin, end))
    return cells


def _stub_message(region: Region) -> str:
    return "exercise — replace this line with your code"


def _strip_all(text: str, where: str) -> tuple[str, int]:
    """`text` with every solution region stubbed (untagged ones and each tag's assignment),
    and how many regions were stubbed."""
    lines = text.splitlines(keepends=True)
    owners = {r.assignment or OWNER for r in find_regions(lines, where) if r.kind == "SOLUTION"}
    stubbed = 0
    for owner in sorted(owners):
        text, regions = strip_source(text, owner, _stub_message, where=where, owner=OWNER)
        stubbed += len(regions)
    return text, stubbed


def test_the_course_notebooks_are_covered():
    names = {path.name[:2] for path in COVERED}
    missing = [f"{n:02d}" for n in range(1, 13) if f"{n:02d}" not in names]
    assert not missing, f"tutorials not found: {missing}"


@pytest.mark.parametrize("path", COVERED, ids=lambda path: path.stem)
def test_exercises_sit_in_code_cells(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    where = str(path.relative_to(ROOT))
    regions = [r for r in find_regions(lines, where) if r.kind == "SOLUTION"]
    assert regions, f"{where}: no ### BEGIN SOLUTION / ### END SOLUTION region"
    cells = _cells(lines)
    for region in regions:
        holder = [(kind, b, e) for kind, b, e in cells if b < region.begin and region.end < e]
        assert holder and holder[0][0] == "code", (
            f"{where}:{region.begin + 1}: the solution region is not inside one code cell"
        )
    markdown = ["\n".join(lines[b:e]) for kind, b, e in cells if kind == "markdown"]
    assert any("**Exercise" in cell for cell in markdown), f"{where}: no **Exercise markdown cell"
    assert any("**Question:**" in cell for cell in markdown), f"{where}: no **Question:** cell"


@pytest.mark.parametrize("path", COVERED, ids=lambda path: path.stem)
def test_stripped_notebook_compiles_with_stubs(path: Path):
    text = path.read_text(encoding="utf-8")
    where = str(path.relative_to(ROOT))
    n_regions = sum(r.kind == "SOLUTION" for r in find_regions(text.splitlines(), where))
    stripped, stubbed = _strip_all(text, where)
    assert stubbed == n_regions >= 1, f"{where}: stubbed {stubbed} of {n_regions} regions"
    left = [r.begin + 1 for r in find_regions(stripped.splitlines(), where) if r.kind == "SOLUTION"]
    assert not left, f"{where} (stripped): solution regions left at lines {left}"
    stub = re.compile(r"^[ \t]*raise NotImplementedError\(.+\)$", re.M)
    assert len(stub.findall(stripped)) == n_regions + len(stub.findall(text)), (
        f"{where}: not every region became one raise NotImplementedError line"
    )
    compile(stripped, f"{where} (stripped)", "exec")
