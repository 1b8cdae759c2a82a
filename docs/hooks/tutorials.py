"""MkDocs hook: the tutorials (`tutorials/NN_*.py`, jupytext sources) as pages of the site.

Each tutorial becomes the page `tutorials/NN_name.md`, generated at build time (nothing is
written into docs/): markdown cells as they are (their `$...$` formulas go through the math
hook like any page's), code cells as Python blocks, and, where an executed copy
`tutorials/NN_name.ipynb` with the same cells exists, its outputs: text as text blocks, figures
as PNG files and drawn graphs (tinyformer.viz) as SVG files beside the page. `make
docs-tutorials` runs the tutorials and writes those copies; without one a page shows the code
alone and says how to get the outputs, so `make docs` stays quick and offline. The nav entry
`Tutorials: tutorials/index.md` in mkdocs.yml (at any depth) becomes a section: an overview
page, then every tutorial in order.

The tutorials' exercises are for students: in the student edition of the site (`extra:
edition: student`, mkdocs.yml) each solution region is a stub, as in a release, the outputs
of the cells that held one are left out, and so are the answers to the questions (`<!--
ANSWER: ... -->` comments, which the page's HTML would carry); the instructor's edition
(mkdocs-instructor.yml) shows the solutions between their `### BEGIN SOLUTION` / `### END
SOLUTION` markers, and keeps the answers.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import jupytext
import nbformat
from mkdocs.structure.files import File

from tinyformer.course.markers import strip_answers, strip_source

__all__ = ["Tutorial", "find_tutorials", "render", "without_solutions"]

INDEX = "tutorials/index.md"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d+[.)])[ \t]")


class Tutorial:
    """One tutorial: its source, the notebook to render, and whether that one was executed."""

    def __init__(self, source: Path):
        self.source, self.stem = source, source.stem
        self.notebook, self.executed = _load(source)
        self.title = _title(self.notebook) or self.stem

    @property
    def page(self) -> str:
        return f"tutorials/{self.stem}.md"


def find_tutorials(root: Path) -> list[Tutorial]:
    return [Tutorial(p) for p in sorted((root / "tutorials").glob("[0-9]*.py"))]


def _load(source: Path):
    """The executed copy if one matches the source cell for cell, else the bare source."""
    bare = jupytext.read(source)
    executed = source.with_suffix(".ipynb")
    try:
        nb = nbformat.read(executed, as_version=4)
    except (OSError, ValueError):  # none yet, or one being written: render the source
        return bare, False
    same = [(c.cell_type, c.source) for c in nb.cells] == [
        (c.cell_type, c.source) for c in bare.cells
    ]
    if same and any(c.get("outputs") for c in nb.cells):
        return nb, True
    return bare, False


def _title(nb) -> str | None:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            first = cell.source.lstrip().splitlines()[:1]
            if first and first[0].startswith("# "):
                return first[0][2:].strip()
    return None


def _fenced(text: str, lang: str) -> str:
    """A fenced block longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _terminal(text: str) -> str:
    """Text as a terminal shows it: no colour codes; each line as its last \\r left it."""
    lines = _ANSI.sub("", text).split("\n")
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in lines)


def _markdown(source: str) -> str:
    """Jupyter starts a list right after a paragraph line; Python-Markdown needs a blank line."""
    out, in_code = [], False
    for line in source.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and _LIST_ITEM.match(line) and out and out[-1].strip():
            if not _LIST_ITEM.match(out[-1]) and not out[-1].startswith((" ", "\t")):
                out.append("")
        out.append(line)
    return "\n".join(out)


def _outputs(cell, name: str, images: dict[str, bytes]) -> list[str]:
    """Markdown for a code cell's outputs; the figures go into `images`."""
    parts, text = [], []

    def flush():
        if text:
            parts.append(_fenced(_terminal("".join(text)), "text"))
            text.clear()

    for k, out in enumerate(cell.get("outputs", [])):
        kind = out.get("output_type")
        if kind == "stream":
            text.append(out.get("text", ""))
            continue
        flush()
        data = out.get("data", {})
        if kind == "error":
            parts.append(_fenced(_terminal("\n".join(out.get("traceback", []))), "text"))
        elif "image/png" in data:
            file = f"{name}-{k}.png"
            images[file] = base64.b64decode(data["image/png"])
            parts.append(f"![output of the cell above]({file.removeprefix('tutorials/')})")
        elif "image/svg+xml" in data:  # tinyformer.viz's graphs: a file, shown as an image
            file = f"{name}-{k}.svg"
            svg = data["image/svg+xml"]
            images[file] = ("".join(svg) if isinstance(svg, list) else svg).encode("utf-8")
            parts.append(f"![output of the cell above]({file.removeprefix('tutorials/')})")
        elif "text/plain" in data:
            parts.append(_fenced(_terminal(data["text/plain"]), "text"))
    flush()
    return parts


def _note(tutorial: Tutorial) -> str:
    where = f"`tutorials/{tutorial.stem}.py`"
    if tutorial.executed:
        body = (
            f"Rendered from {where} with the outputs of its last run by `make docs-tutorials`. "
            "Open the source in Jupyter (it is a jupytext notebook) to run it yourself."
        )
    else:
        body = (
            f"Rendered from {where} without outputs: no executed copy matches the source. "
            "`make docs-tutorials` runs the tutorials and builds the site with their outputs."
        )
    return f'!!! note "How this page was made"\n    {body}'


def _stub(region) -> str:
    tag = f"{region.tag}: " if region.tag else ""
    return f"{tag}exercise — replace this line with your code"


def without_solutions(source: str, where: str) -> str:
    """A code cell's source with every solution region a stub, as a release has it."""
    if "### BEGIN SOLUTION" not in source:
        return source
    text, _ = strip_source(source, "", _stub, where=where, stub=lambda region, owner: True)
    return text


def render(tutorial: Tutorial, solutions: bool = True) -> tuple[str, dict[str, bytes]]:
    """The page's markdown, and its figures by site path; without the exercises' solutions
    (or the outputs of their cells) or the questions' answers unless `solutions`."""
    images: dict[str, bytes] = {}
    blocks, noted = [], False
    for index, cell in enumerate(tutorial.notebook.cells):
        if cell.cell_type == "code" and not solutions and "### BEGIN SOLUTION" in cell.source:
            where = f"tutorials/{tutorial.stem}.py cell {index}"
            blocks.append(_fenced(without_solutions(cell.source, where), "python"))
            continue
        if cell.cell_type == "markdown":
            source = _markdown(cell.source if solutions else strip_answers(cell.source))
            if not noted and source.lstrip().startswith("# "):
                head, _, rest = source.lstrip().partition("\n")
                source, noted = f"{head}\n\n{_note(tutorial)}\n\n{rest}", True
            blocks.append(source)
        elif cell.cell_type == "code" and cell.source.strip():
            blocks.append(_fenced(cell.source, "python"))
            blocks.extend(_outputs(cell, f"tutorials/{tutorial.stem}/cell{index}", images))
    if not noted:
        blocks.insert(0, f"# {tutorial.title}\n\n{_note(tutorial)}")
    return "\n\n".join(blocks) + "\n", images


def _index(tutorials: list[Tutorial]) -> str:
    rows = "\n".join(
        f"| [{t.title}]({t.stem}.md) | {'yes' if t.executed else 'no'} |" for t in tutorials
    )
    return f"""# Tutorials

Jupyter notebooks that build the ideas up one at a time, from autograd to vision transformers.
Their sources are the jupytext files `tutorials/NN_name.py`: `make notebooks` turns them into
notebooks and runs them as tests, and any Jupyter with jupytext opens them directly.

The pages below show each tutorial with the outputs of its last run by `make docs-tutorials`
(which executes them all, at the small sizes the tests use, and rebuilds this site). Without
that step `make docs` renders the code alone.

| tutorial | with outputs |
|---|---|
{rows}
"""


# The hook proper.
_TUTORIALS: list[Tutorial] = []
_SOLUTIONS = [True]  # the edition shows the tutorials' solutions


def _expand(nav: list, section: list) -> bool:
    """Replace the entry `... : tutorials/index.md` in `nav` (or a section in it) by `section`."""
    for i, item in enumerate(nav):
        if not isinstance(item, dict):
            continue
        (title, value), *_ = item.items()
        if value == INDEX:
            nav[i] = {title: section}
            return True
        if isinstance(value, list) and _expand(value, section):
            return True
    return False


def on_config(config):
    _TUTORIALS[:] = find_tutorials(Path(config.config_file_path).parent)
    _SOLUTIONS[0] = (config.extra or {}).get("edition", "instructor") != "student"
    if config.nav is None:  # no nav in mkdocs.yml: MkDocs lists every page itself
        return config
    section = [{"Overview": INDEX}] + [{t.title: t.page} for t in _TUTORIALS]
    if not _expand(config.nav, section):
        config.nav.append({"Tutorials": section})
    return config


# MkDocs' theme finds headings with querySelector("#" + id), which throws on an id that starts
# with a digit, as the slugs of numbered headings do ("# 1. Autograd" -> "1-autograd"): the page
# then logs errors and its sidebar stops following the reader. Such ids get a prefix.
_DIGIT_ID = re.compile(r'(<h[1-6] id="|href="#)(\d)')


def on_page_content(html, page, config, files):
    _prefix_ids(page.toc)
    return _DIGIT_ID.sub(r"\1section-\2", html)


def _prefix_ids(items) -> None:
    for item in items:
        if item.id[:1].isdigit():
            item.id = f"section-{item.id}"
        _prefix_ids(item.children)


def on_files(files, config):
    files.append(File.generated(config, INDEX, content=_index(_TUTORIALS)))
    for tutorial in _TUTORIALS:
        markdown, images = render(tutorial, solutions=_SOLUTIONS[0])
        files.append(File.generated(config, tutorial.page, content=markdown))
        for path, png in images.items():
            files.append(File.generated(config, path, content=png))
    return files
