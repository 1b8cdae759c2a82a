"""The docs' formulas and tutorial pages, without a browser.

Every `$...$` formula in docs/ and in the tutorials' markdown converts to MathML; no dollar is
left over outside code (a formula the hook missed would show as raw LaTeX); the op pages carry
their forward and backward formulas; the hooks protect code and fail loudly on bad LaTeX; and a
strict build gives formulas as MathML and a page per tutorial.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("latex2mathml", reason="latex2mathml (the dev extras) renders the docs' math")
pytest.importorskip("mkdocs", reason="mkdocs (the dev extras) builds the docs")
markdown = pytest.importorskip("markdown")
jupytext = pytest.importorskip("jupytext")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
TUTORIALS = sorted((ROOT / "tutorials").glob("[0-9]*.py"))


def _load(name: str):
    path = DOCS / "hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mathml = _load("mathml")
tutorials = _load("tutorials")


def _tutorial_markdown(path: Path) -> str:
    cells = jupytext.read(path).cells
    return "\n\n".join(c.source for c in cells if c.cell_type == "markdown")


def _sources():
    for page in PAGES:
        yield pytest.param(page.read_text(encoding="utf-8"), id=str(page.relative_to(ROOT)))
    for path in TUTORIALS:
        yield pytest.param(_tutorial_markdown(path), id=str(path.relative_to(ROOT)))


@pytest.mark.parametrize("text", list(_sources()))
def test_every_formula_converts_and_no_dollar_is_left(text):
    replaced, converted = mathml.replace_formulas(text, "page")  # raises on a bad formula
    assert len(converted) == len(mathml.find_formulas(text))
    # What is left outside code and comments must hold no dollar: one would be a formula the
    # hook did not recognise ("$ x$"), shown to readers as raw LaTeX.
    prose = mathml._PATTERN.sub("", replaced)
    assert "$" not in prose, prose[max(0, prose.index("$") - 80) : prose.index("$") + 80]


@pytest.mark.parametrize("page", sorted((DOCS / "ops").glob("*.md")), ids=lambda p: p.name)
def test_op_pages_write_their_formulas_in_latex(page):
    formulas = mathml.find_formulas(page.read_text(encoding="utf-8"))
    gradients = [f for f in formulas if re.search(r"g_\{?[a-zA-Z]", f.latex)]
    assert len(formulas) >= 5 and gradients, f"{page.name}: forward and backward formulas"


def _sections(page: Path) -> dict[str, str]:
    parts = re.split(r"^###? (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize(
    "op, gradients",
    [
        ("conv2d", ["g_w", "g_b", "g_{x_{\\text{pad}}}"]),
        ("conv1d", ["g_w", "g_b", "g_{x_{\\text{pad}}}"]),
        ("conv_transpose2d", ["g_w", "g_b", "g_x"]),
        ("max_pool2d", ["g_x"]),
        ("max_unpool2d", ["g_x"]),
        ("avg_pool2d", ["g_{x_{\\text{pad}}}"]),
        ("Resizing", ["g_x"]),
    ],
)
def test_conv_page_has_each_ops_backward(op, gradients):
    section = _sections(DOCS / "ops" / "conv.md")[op]
    display = [f.latex for f in mathml.find_formulas(section) if f.display]
    assert display, f"{op}: no displayed formula"
    for g in gradients:
        assert any(g in latex for latex in display), f"{op}: no formula for {g}"


def _render(text: str) -> str:
    replaced, converted = mathml.replace_formulas(text, "page")
    return mathml.restore(markdown.markdown(replaced, extensions=["tables"]), converted)


def test_underscores_and_stars_inside_math_are_not_emphasis():
    html = _render("a $x_1 * y_2 * z$ and $a_b$ b")
    assert "<em>" not in html and html.count("<math") == 2 and "<msub>" in html


def test_code_and_escaped_dollars_are_left_alone():
    text = "`$a$` costs \\$5 or $10, $ x$ no\n\n```\n$ echo $HOME$\n```\n<!-- $\\bad{$ -->\n"
    assert mathml.find_formulas(text) == []
    html = _render(text)
    assert "<math" not in html and "$a$" in html and "$ echo $HOME$" in html and "&#36;5" in html


def test_display_math_over_lines_and_inside_a_table():
    table = "| x | y |\n|---|---|\n| $\\lvert x \\rvert$ | 1 |\n"
    html = _render("$$\na = \\frac{b}{c}\n$$\n\n" + table)
    assert 'display="block"' in html and "<mfrac>" in html and "<td><math" in html


@pytest.mark.parametrize(
    "latex, reason",
    [("\\frac{a}{b", "unbalanced"), ("\\foo x", "unknown command"), ("a &= b", "malformed")],
)
def test_a_bad_formula_fails_naming_page_and_formula(latex, reason):
    with pytest.raises(mathml.MathError, match=reason) as err:
        mathml.replace_formulas(f"line one\n\nsee ${latex}$ here", "ops/bad.md")
    assert "ops/bad.md" in str(err.value) and latex in str(err.value) and "line 3" in str(err.value)


def test_a_tutorial_renders_with_its_outputs_or_says_it_has_none(tmp_path):
    import nbformat

    (tmp_path / "tutorials").mkdir()
    source = tmp_path / "tutorials" / "01_demo.py"
    source.write_text('# %% [markdown]\n# # 1. Demo\n# Math: $a_1$\n\n# %%\nprint("hi")\n')
    (bare,) = tutorials.find_tutorials(tmp_path)
    page, images = tutorials.render(bare)
    assert not bare.executed and "without outputs" in page and images == {}
    assert bare.title == "1. Demo" and page.startswith("# 1. Demo\n")

    nb = jupytext.read(source)
    png = b"\x89PNG\r\n\x1a\nfake"
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><text>a &lt; b</text></svg>'  # a viz graph
    nb.cells[1].outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="step 1\rstep 2\nhi\n"),
        nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgpmYWtl"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": svg, "text/plain": "g"}),
    ]
    nbformat.write(nb, source.with_suffix(".ipynb"))
    (executed,) = tutorials.find_tutorials(tmp_path)
    page, images = tutorials.render(executed)
    assert executed.executed and "```text\nstep 2\nhi\n```" in page
    assert images == {
        "tutorials/01_demo/cell1-1.png": png,
        "tutorials/01_demo/cell1-2.svg": svg.encode(),
    }
    assert "![output of the cell above](01_demo/cell1-1.png)" in page
    assert "![output of the cell above](01_demo/cell1-2.svg)" in page and "```text\ng" not in page

    source.write_text(source.read_text().replace('"hi"', '"changed"'))
    (stale,) = tutorials.find_tutorials(tmp_path)  # the executed copy no longer matches
    assert not stale.executed and "changed" in tutorials.render(stale)[0]


def test_strict_build_has_mathml_and_the_tutorials(tmp_path):
    site = tmp_path / "site"
    run = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    conv = (site / "ops" / "conv" / "index.html").read_text(encoding="utf-8")
    assert conv.count("<math") >= 30 and "tfmathml" not in conv and "\\frac" not in conv
    pages = {p.parent.name for p in (site / "tutorials").glob("*/index.html")}
    assert pages == {p.stem for p in TUTORIALS}
    assert not (site / "hooks").exists()
