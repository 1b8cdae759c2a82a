"""MkDocs hook: LaTeX formulas become native MathML at build time, so they render offline.

Pages write math as pandoc and Jupyter do: `$...$` inline, `$$...$$` displayed. Chromium and
Firefox render MathML themselves, so the site needs no JavaScript and fetches nothing.

In `on_page_markdown`, before Markdown reads the page, every formula is converted with
latex2mathml and replaced by a placeholder of letters and digits, which Markdown leaves alone
(so `_` and `*` inside a formula are never read as emphasis, nor `|` as a table cell);
`on_page_content` puts the MathML back. Fenced code blocks, code spans and HTML comments are
left as they are, and `\\$` is a literal dollar.

A formula that latex2mathml cannot convert fails the build, naming the page and the formula:
latex2mathml itself accepts almost anything, so `to_mathml` also refuses unbalanced braces,
output that is not well-formed XML (alignment `&` outside a matrix) and commands it left as
text (`\\foo`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

__all__ = ["MathError", "Formula", "find_formulas", "replace_formulas", "restore", "to_mathml"]

_NO_BLANK_LINE = r"(?:(?!\n[ \t]*\n)[\s\S])"
_PATTERN = re.compile(
    # Fenced code: a fence line, anything, the same fence again (or the end of the page).
    r"(?P<fence>^[ \t]*(?P<ticks>`{3,}|~{3,})[^\n]*\n[\s\S]*?(?:^[ \t]*(?P=ticks)[ \t]*$|\Z))"
    r"|(?P<comment><!--[\s\S]*?-->)"
    # A code span: a run of backticks, then the same run, within one paragraph.
    rf"|(?P<code>(?P<run>`+){_NO_BLANK_LINE}+?(?<!`)(?P=run)(?!`))"
    r"|(?P<escaped>\\\$)"
    rf"|\$\$(?P<display>{_NO_BLANK_LINE}+?)\$\$"
    # Inline, as pandoc: no space after the opening $, none before the closing one, and no
    # digit after it ("costs $5 or $10" is no formula).
    r"|\$(?P<inline>(?:\\.|[^\s$\\])(?:(?:\\.|[^$\\\n]|\n(?![ \t]*\n))*?(?:\\.|[^\s$\\]))?)"
    r"\$(?!\d)",
    re.MULTILINE,
)
# latex2mathml writes `\sin x` as <mi>sin</mi><mi>x</mi>, which browsers set as "sinx": add
# TeX's thin space after a function name that an argument follows without parentheses.
_FUNCTION_NAME = re.compile(r"(<mi>[A-Za-z]{2,}</mi>)(?=<(?:mi|mn|msub|msup|mrow|mover|mfrac)\b)")
_PLACEHOLDER = "tfmathml{}x"
_PLACEHOLDER_RE = re.compile(r"tfmathml(\d+)x")


class MathError(ValueError):
    """A formula that cannot be converted to MathML."""


class Formula:
    """One formula found in a page: its LaTeX, and whether it is displayed."""

    def __init__(self, latex: str, display: bool, line: int):
        self.latex, self.display, self.line = latex, display, line

    def __repr__(self) -> str:
        fence = "$$" if self.display else "$"
        return f"{fence}{self.latex}{fence} (line {self.line})"


def _balanced(latex: str) -> bool:
    depth = 0
    for token in re.findall(r"\\.|[{}]", latex):
        if token in "{}":
            depth += 1 if token == "{" else -1
            if depth < 0:
                return False
    return depth == 0


def to_mathml(latex: str, display: bool = False) -> str:
    """The MathML for one formula; raises MathError where latex2mathml would render junk."""
    if not _balanced(latex):
        raise MathError("unbalanced braces")
    try:
        mathml = convert(latex.strip(), display="block" if display else "inline")
    except Exception as err:  # latex2mathml raises its own exceptions, and IndexError etc.
        raise MathError(f"{type(err).__name__}: {err}") from err
    try:
        tree = ET.fromstring(mathml)
    except ET.ParseError as err:
        raise MathError(f"latex2mathml wrote malformed MathML ({err})") from err
    for node in tree.iter():
        for text in (node.text, node.tail):
            if text and "\\" in text:
                raise MathError(f"unknown command {text.strip()!r}")
    return _FUNCTION_NAME.sub(r'\1<mspace width="0.167em" />', mathml)


def find_formulas(markdown: str) -> list[Formula]:
    """Every formula in a page, in order, outside code and comments."""
    return [f for f, _ in _scan(markdown) if f is not None]


def _scan(markdown: str):
    """(Formula or None, match) for every match of the pattern."""
    for m in _PATTERN.finditer(markdown):
        line = markdown.count("\n", 0, m.start()) + 1
        if m.group("display") is not None:
            yield Formula(m.group("display"), True, line), m
        elif m.group("inline") is not None:
            yield Formula(m.group("inline"), False, line), m
        else:
            yield None, m


def replace_formulas(markdown: str, where: str) -> tuple[str, list[str]]:
    """The page with each formula replaced by a placeholder, and the MathML of each one.

    Raises MathError naming `where`, the line and the formula for one that does not convert.
    """
    if _PLACEHOLDER_RE.search(markdown):
        raise MathError(f"{where}: the page contains the text of a math placeholder")
    out, mathml, last = [], [], 0
    for formula, m in _scan(markdown):
        out.append(markdown[last : m.start()])
        last = m.end()
        if formula is None:
            out.append("&#36;" if m.group("escaped") else m.group(0))
            continue
        try:
            mathml.append(to_mathml(formula.latex, formula.display))
        except MathError as err:
            raise MathError(f"{where}: cannot convert the formula {formula!r}: {err}") from err
        out.append(_PLACEHOLDER.format(len(mathml) - 1))
    out.append(markdown[last:])
    return "".join(out), mathml


def restore(html: str, mathml: list[str]) -> str:
    return _PLACEHOLDER_RE.sub(lambda m: mathml[int(m.group(1))], html)


# The hook proper. Formulas wait here between a page's markdown and its HTML.
_PENDING: dict[str, list[str]] = {}


def on_page_markdown(markdown, page, config, files):
    try:
        text, mathml = replace_formulas(markdown, page.file.src_uri)
    except MathError as err:
        raise PluginError(str(err)) from err
    _PENDING[page.file.src_uri] = mathml
    return text


def on_page_content(html, page, config, files):
    mathml = _PENDING.pop(page.file.src_uri, [])
    _fix_toc(page.toc, mathml)
    return restore(html, mathml)


def _fix_toc(items, mathml: list[str]) -> None:
    """A formula in a heading: the sidebar shows its text (the sidebar is plain text)."""
    for item in items:
        item.title = _PLACEHOLDER_RE.sub(
            lambda m: "".join(ET.fromstring(mathml[int(m.group(1))]).itertext()), item.title
        )
        _fix_toc(item.children, mathml)
