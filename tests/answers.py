"""What counts as an answer, for the tests that look for answers where students can read them
(tests/test_release_answers.py: the releases; tests/test_docs_editions.py: the students' site).

Three forms of an answer, each searched for in its own way:

- `formulas()`: the derivations the graded tasks ask for, as the instructor's tree writes them
  in comments inside its solution regions, plus the forms in which they used to ship in
  docstrings and tutorials (tests/test_release_answers.py lists those: this module ships in
  releases, and quotes no answer). Searched with all
  whitespace removed, anywhere in a file's text: a docstring, a markdown cell or a page.
- `graded_code()`: the code of the graded tasks' solution regions, with every name that is no
  attribute and no keyword argument written `_`, so that the same computation under other
  variable names (`np.exp(s - s.max(...))` for the library's `xp.exp(x - x.max(...))`) still
  matches. Searched as two consecutive lines of code, or as one line that says enough alone.
- an HTML comment `<!-- ANSWER: ... -->`: the answer to a tutorial's question.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

from tinyformer.course import COURSE
from tinyformer.course.markers import find_regions, syntax_of
from tinyformer.course.release import tree_files

MIN_FORMULA = 14  # characters without whitespace: shorter comments are not a derivation
MIN_LINE = 16  # characters of a canonical code line, each of a pair
MIN_PAIR = 56  # characters of a canonical pair of lines
MIN_WORDS = 4  # attribute and keyword names and numbers in a pair: loops and unpacking have few
MIN_ALONE, MIN_ALONE_WORDS = 40, 4  # a line that is an answer by itself


@dataclass(frozen=True)
class Answer:
    where: str  # file:line in the instructor's tree
    owner: str | None  # the assignment; None for a tutorial's untagged exercise
    library: bool  # a library region (ships once its assignment is due)
    text: str  # the formula without whitespace, or canonical code lines joined by newlines


def squeeze(text: str) -> str:
    """`text` without any whitespace."""
    return re.sub(r"\s+", "", text)


def _solution_regions(root: Path):
    """(path from root, owning assignment, region, lines) of every solution region of the
    instructor's Python sources (not tests/, whose markers are sample strings)."""
    owners = {nb: a.name for a in COURSE.values() for nb in a.notebooks}
    for rel in tree_files(root):
        if syntax_of(rel) is None or rel.suffix != ".py" or rel.parts[0] == "tests":
            continue
        lines = (root / rel).read_text(encoding="utf-8").splitlines()
        for r in find_regions(lines, rel.as_posix()):
            if r.kind == "SOLUTION":
                yield rel, r.assignment or owners.get(rel.as_posix()), r, lines


def formulas(root: Path, prose: dict[str, tuple[str, ...]]) -> list[Answer]:
    """The derivations in the comments of the solution regions, and `prose`: task id -> the
    forms in which they were once written elsewhere."""
    found = []
    for rel, owner, r, lines in _solution_regions(root):
        for i in range(r.begin + 1, r.end):
            comment = lines[i].strip()
            if not comment.startswith("#") or comment.startswith("###") or "=" not in comment:
                continue
            for part in comment.lstrip("#").split(", that is "):
                formula = squeeze(part.split(": ")[0]).rstrip(".,;")
                if len(formula) >= MIN_FORMULA and "=" in formula:
                    found.append(Answer(f"{rel}:{i + 1}", owner, r.library, formula))
    for tag, texts in prose.items():
        found += [Answer(f"PROSE {tag}", tag.split(".")[0], False, squeeze(t)) for t in texts]
    return found


def canonical(source: str) -> list[str]:
    """The code lines of `source`, each with its names written `_` (attributes and keyword
    arguments kept), its comments and strings dropped, and a leading `return` or `name =`
    dropped; lines that do not tokenize are left out (a markdown cell, a stub)."""
    out = []
    for line in source.splitlines():
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            continue
        parts, previous, depth = [], None, 0
        for k, tok in enumerate(tokens):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER):
                continue
            text = tok.string
            if tok.type == tokenize.STRING:
                text = "''"
            elif tok.type == tokenize.NAME and text not in _KEYWORDS:
                following = tokens[k + 1].string if k + 1 < len(tokens) else ""
                keyword = depth > 0 and following == "="  # f(axis=-1): the name says something
                if previous != "." and not keyword:
                    text = "_"
            depth += text in "([{" and tok.type == tokenize.OP
            depth -= text in ")]}" and tok.type == tokenize.OP
            parts.append(text)
            previous = tok.string
        if parts[:1] == ["return"] or parts[:2] == ["_", "="]:
            parts = parts[1:] if parts[0] == "return" else parts[2:]  # `y = e` as `return e`
        if parts:
            out.append(" ".join(parts))
    return out


_KEYWORDS = {
    "return", "for", "in", "if", "else", "while", "def", "lambda", "not", "and", "or", "is",
    "None", "True", "False", "with", "as", "yield", "import", "from",
}  # fmt: skip


def _informative(line: str) -> int:
    """How many attribute and keyword names and numbers a canonical line holds."""
    return sum(w.isalnum() and w not in _KEYWORDS for w in line.split())


def graded_code(root: Path) -> list[Answer]:
    """Every pair of consecutive canonical code lines of a graded task's solution region (a
    region tagged with a task id, not a library region), long enough to say something, and
    every line that says enough alone (`return y * (gy - (gy * y).sum(...))`)."""
    found = []
    for rel, owner, r, lines in _solution_regions(root):
        if r.tag is None or "." not in r.tag or r.library:
            continue
        where = f"{rel}:{r.begin + 1}"
        code = canonical("\n".join(lines[r.begin + 1 : r.end]))
        for a, b in zip(code, code[1:]):
            long = min(len(a), len(b)) >= MIN_LINE and len(a) + len(b) >= MIN_PAIR
            if long and _informative(f"{a} {b}") >= MIN_WORDS:
                found.append(Answer(where, owner, False, f"{a}\n{b}"))
        found += [
            Answer(where, owner, False, line)
            for line in code
            if len(line) >= MIN_ALONE and _informative(line) >= MIN_ALONE_WORDS
        ]
    return found


def code_pairs(source: str) -> set[str]:
    """The canonical pairs of consecutive code lines of `source`, and its lines."""
    code = canonical(source)
    return {f"{a}\n{b}" for a, b in zip(code, code[1:])} | set(code)
