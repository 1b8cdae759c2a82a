"""Solution and hidden-test markers, with nbgrader's syntax, and the stripping that releases them.

A region is a run of lines between a BEGIN and an END marker line, each a comment alone on its
line: `### BEGIN SOLUTION A2.4 backward` ... `### END SOLUTION` around an answer (it becomes a
stub in A2's release), `### BEGIN HIDDEN TESTS` ... `### END HIDDEN TESTS` around
instructor-only tests (removed from every release). The word after the marker is the region's
tag: a task ("A2.3") or an assignment ("A2"); nbgrader ignores anything after the marker, so the
tagged files still work with nbgrader. What follows the tag is a note for the stub's message
("backward"). An untagged solution region belongs to the assignment whose notebook holds it;
elsewhere (e.g. a tutorial's exercise) it belongs to no assignment (a release stubs it all
the same: see `strip_source`'s `stub`).

Stripping for assignment NAME replaces each of NAME's solution regions, markers included, with
one line at the BEGIN marker's indentation,
`raise NotImplementedError("A2.4: layer_norm backward — see docs/ops/layers.md")`,
removes every hidden-test region, and leaves other assignments' regions (and their markers) as
they are. Regions do not nest. A release asks for more (`tinyformer.course.release`): it says
which regions to stub (every one that is not yet due), and keeps each stub between
`### BEGIN YOUR CODE TAG` and `### END YOUR CODE` lines, so that `sync` can carry the student's
code into the next release. A region whose note starts with `library` is the library's own copy
of an answer (the engine's topological sort is A1.2's): see `Region.library`.

CUDA sources (`.cu`, `.cuh`) hold the same markers behind C's comment, `// ### BEGIN SOLUTION
A5.3` ... `// ### END SOLUTION`, and a stubbed region becomes a comment, which compiles:
`// TODO A5.3: softmax forward CUDA kernel — see docs/cuda-kernels.md`. C cannot raise, so the
Python code that loads such a source raises the NotImplementedError instead, with the message
after `TODO ` (`stub_message` finds it). Pages (`.md`) hold them as HTML comments, `<!-- ###
BEGIN SOLUTION A2.1 backward -->` ... `<!-- ### END SOLUTION -->`, around a derivation that
is a task's answer; a stub is a quoted line of text. A `Syntax` says how each file type writes
both; `syntax_of(path)` picks it by suffix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath

__all__ = [
    "CUDA",
    "MARKDOWN",
    "PYTHON",
    "MarkerError",
    "Region",
    "Syntax",
    "find_regions",
    "solution_regions",
    "strip_answers",
    "strip_notebook",
    "strip_source",
    "stub_message",
    "syntax_of",
]

_MARKER = (
    r"### (?P<edge>BEGIN|END) (?P<kind>SOLUTION|HIDDEN TESTS|YOUR CODE)"
    r"(?:[ \t]+(?P<tag>[A-Z]+[0-9]+(?:\.[0-9]+)?)\b)?(?P<note>[^\n]*)$"
)
_TODO = "// TODO "  # a CUDA stub: the comment, then the message


@dataclass(frozen=True)
class Syntax:
    """How one kind of file writes a marker line and a stub.

    Attributes:
        marker: matches a marker line: its indentation, then what the language needs before
            `### ` (nothing in Python, where `###` is itself a comment; `//` in C).
        stub: the message -> the line (without indentation) that replaces a solution region.
    """

    marker: re.Pattern[str]
    stub: Callable[[str], str]
    lead: str = ""  # what a marker line writes before `### `
    trail: str = ""  # and after the marker (an HTML comment's end)


def _marker(lead: str) -> re.Pattern[str]:
    return re.compile(rf"^(?P<indent>[ \t]*){lead}{_MARKER}")


def _raise(message: str) -> str:
    return f"raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"  # valid str


PYTHON = Syntax(_marker(""), _raise)
CUDA = Syntax(_marker(r"//[ \t]*"), lambda message: f"{_TODO}{message}", "// ")
# A page: the markers are HTML comments, `<!-- ### BEGIN SOLUTION A2.1 backward -->`, and a
# stub is a quoted line of text.
MARKDOWN = Syntax(_marker(r"<!--[ \t]*"), lambda message: f"> {message}", "<!-- ", " -->")
_SUFFIXES = {".py": PYTHON, ".ipynb": PYTHON, ".cu": CUDA, ".cuh": CUDA, ".md": MARKDOWN}


def syntax_of(path: str | PurePath) -> Syntax | None:
    """The syntax of a file that may hold markers, by its suffix; None for any other file."""
    return _SUFFIXES.get(PurePath(path).suffix)


def stub_message(source: str, tag: str) -> str | None:
    """The message of task `tag`'s stub in a released CUDA source, or None if it has none: the
    text after `// TODO ` on a line of its own, from the tag on ("A5.3: ...")."""
    found = re.search(rf"^[ \t]*{_TODO}({re.escape(tag)}: .*?)[ \t]*$", source, re.M)
    return None if found is None else found.group(1)


class MarkerError(ValueError):
    """Markers that do not pair up, or a region that cannot be released."""


@dataclass(frozen=True)
class Region:
    """One marked region: lines `begin` to `end` (0-based, both marker lines included)."""

    kind: str  # "SOLUTION", "HIDDEN TESTS" or "YOUR CODE" (a released stub, see strip_source)
    tag: str | None  # "A2.3", "A2" or None
    note: str  # text after the tag, e.g. "backward"
    begin: int
    end: int
    indent: str

    @property
    def assignment(self) -> str | None:
        return None if self.tag is None else self.tag.split(".")[0]

    @property
    def library(self) -> bool:
        """A library region: the library's own copy of an answer (its note starts with the word
        `library`), which the rest of the library runs on."""
        return self.note.split(" ", 1)[0].rstrip(":") == "library"


def find_regions(lines: list[str], where: str, syntax: Syntax = PYTHON) -> list[Region]:
    """The regions in `lines`, in order; `where` names the file in errors."""
    regions, open_at = [], None
    for i, line in enumerate(lines):
        m = syntax.marker.match(line.rstrip("\r\n"))
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
        note = b["note"].strip().removesuffix("-->").strip()  # a page's marker ends its comment
        regions.append(Region(b["kind"], b["tag"], note, begin, i, b["indent"]))
        open_at = None
    if open_at is not None:
        raise MarkerError(f"{where}:{open_at[0] + 1}: BEGIN {open_at[1]['kind']} is never ended")
    return regions


def solution_regions(path: Path) -> list[Region]:
    """The solution regions of the source file `path` ([] for a file that is no source, holds
    no marker, or whose markers do not pair up: a docstring may quote one)."""
    syntax = syntax_of(path)
    if syntax is None or not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    if "### BEGIN SOLUTION" not in text:
        return []
    try:
        return [
            r for r in find_regions(text.splitlines(), str(path), syntax) if r.kind == "SOLUTION"
        ]
    except MarkerError:
        return []


def strip_source(
    text: str,
    assignment: str,
    message: Callable[[Region], str],
    *,
    where: str,
    owner: str | None = None,
    syntax: Syntax = PYTHON,
    stub: Callable[[Region, str | None], bool] | None = None,
    keep_markers: bool = False,
) -> tuple[str, list[Region]]:
    """`text` as released for `assignment`, and the solution regions that became stubs.

    Args:
        text: a Python source (a module, or a jupytext notebook's percent-format source), or a
            source in another `syntax`.
        assignment: the assignment being released, e.g. "A2".
        message: the NotImplementedError message for a stubbed region.
        where: the file's name, for errors.
        owner: the assignment this file is a notebook of: its untagged regions belong to it
            (in other files they belong to no assignment: their owner is None).
        syntax: how the file writes markers and stubs (`syntax_of(where)` for a path).
        stub: (region, its owner) -> whether the region becomes a stub; by default, exactly
            the regions owned by `assignment`.
        keep_markers: write each stub between `### BEGIN YOUR CODE TAG` and `### END YOUR
            CODE` lines, so that the student's code can be found again (`sync`).
    """
    lines = text.splitlines(keepends=True)
    regions = find_regions(lines, where, syntax)
    out, stubbed, last = [], [], 0
    for region in regions:
        region_owner = region.assignment or owner
        out += lines[last : region.begin]
        last = region.end + 1
        if region.kind == "HIDDEN TESTS":
            continue
        if region.kind == "YOUR CODE" or not (
            stub(region, region_owner) if stub is not None else region_owner == assignment
        ):
            out += lines[region.begin : last]
            continue
        newline = "\r\n" if lines[region.begin].endswith("\r\n") else "\n"
        body = [f"{region.indent}{syntax.stub(message(region))}{newline}"]
        if keep_markers:
            body = [
                lines[region.begin].replace("BEGIN SOLUTION", "BEGIN YOUR CODE", 1),
                *body,
                f"{region.indent}{syntax.lead}### END YOUR CODE{syntax.trail}{newline}",
            ]
        out += body
        stubbed.append(region)
    out += lines[last:]
    return "".join(out), stubbed


def strip_answers(text: str) -> str:
    """`text` without the answers to a tutorial's questions: each HTML comment that starts
    `<!-- ANSWER`, in markdown or in a jupytext source's markdown lines (`# <!-- ANSWER: ...`
    up to the line that holds `-->`). The lines that held only the answer go; text before or
    after it on a line stays."""
    if "ANSWER" not in text:
        return text
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if not inside:
            start = re.search(r"<!--[ \t]*ANSWER\b", body)
            if start is None:
                out.append(line)
                continue
            head, inside = body[: start.start()], True
            body = body[start.start() :]
        else:
            head = ""
        end = body.find("-->")
        if end < 0:
            if head.strip(" \t#"):
                out.append(head.rstrip() + line[len(line.rstrip("\r\n")) :])
            continue
        inside = False
        rest = head + body[end + 3 :]
        if rest.strip(" \t#"):
            out.append(rest.rstrip() + line[len(line.rstrip("\r\n")) :])
    return "".join(out)


def strip_notebook(
    text: str,
    assignment: str,
    message: Callable[[Region], str],
    *,
    where: str,
    owner: str | None = None,
    stub: Callable[[Region, str | None], bool] | None = None,
    keep_markers: bool = False,
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
            source, assignment, message, where=f"{where} cell {n}", owner=owner, stub=stub,
            keep_markers=keep_markers,
        )  # fmt: skip
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            cell["outputs"], cell["execution_count"] = [], None  # outputs would show answers
        stubbed += regions
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", stubbed
