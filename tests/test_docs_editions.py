"""The two editions of the site: the students' (`make docs`) has no instructor page and no
tutorial solution (nor a graded task's code or derivation, nor a question's answer); the
instructor's (`make docs-instructor`) has both. And a navigation of a
few sections that still lists every page.

The hooks are called directly (no MkDocs build: `make docs` and tests/test_docs_browser.py
build the site).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tinyformer.course.markers import find_regions, syntax_of

from .answers import code_pairs, formulas, graded_code, squeeze

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ["Home", "Course", "Ops", "Models", "Kernels", "Reference"]


def _hook(name: str):
    spec = importlib.util.spec_from_file_location(
        f"docs_hook_{name}", ROOT / f"docs/hooks/{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(path: Path) -> dict:
    # mkdocs.yml holds no tags, so the safe loader reads it
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _pages(value)]
    return [p for item in nav for p in _pages(item)]


def test_the_navigation_is_a_few_sections_that_list_every_student_page():
    config = _config(ROOT / "mkdocs.yml")
    assert [next(iter(item)) for item in config["nav"]] == SECTIONS
    assert config["extra"]["edition"] == "student"
    listed = set(_pages(config["nav"]))
    pages = {
        p.relative_to(ROOT / "docs").as_posix()
        for p in (ROOT / "docs").rglob("*.md")
        if "hooks" not in p.parts
    }
    editions = _hook("editions")
    instructor = {p for p in pages if editions._instructor_only(p)}
    assert instructor >= {"instructors.md", "course/A2.md"}
    assert not listed & instructor
    assert pages - instructor <= listed, sorted(pages - instructor - listed)


def test_the_instructor_edition_inherits_and_adds_the_instructor_pages():
    config = _config(ROOT / "mkdocs-instructor.yml")
    assert config["INHERIT"] == "mkdocs.yml" and config["extra"]["edition"] == "instructor"
    editions = _hook("editions")
    nav = _config(ROOT / "mkdocs.yml")["nav"]
    editions.on_config(
        SimpleNamespace(extra={"edition": "instructor"}, nav=nav, docs_dir=ROOT / "docs")
    )
    course = next(item["Course"] for item in nav if "Course" in item)
    added = _pages(course[-1])
    assert added[0] == "instructors.md" and "course/A5.md" in added


@pytest.mark.parametrize("edition, kept", [("student", False), ("instructor", True)])
def test_instructor_pages_are_not_built_for_students(edition, kept):
    editions = _hook("editions")
    config = SimpleNamespace(extra={"edition": edition}, nav=None, docs_dir=ROOT / "docs")
    editions.on_config(config)
    files = [SimpleNamespace(src_uri=u) for u in ("index.md", "instructors.md", "course/A1.md")]
    left = [f.src_uri for f in editions.on_files(files, config)]
    assert left == (["index.md", "instructors.md", "course/A1.md"] if kept else ["index.md"])


def test_the_student_tutorial_pages_hold_no_solution():
    tutorials = _hook("tutorials")
    for tutorial in tutorials.find_tutorials(ROOT):
        lines = tutorial.source.read_text(encoding="utf-8").splitlines()
        bodies = [
            "\n".join(lines[r.begin + 1 : r.end])
            for r in find_regions(lines, str(tutorial.source))
            if r.kind == "SOLUTION"
        ]
        student, _ = tutorials.render(tutorial, solutions=False)
        instructor, _ = tutorials.render(tutorial, solutions=True)
        assert "### BEGIN SOLUTION" not in student and "replace this line" in student
        assert "### BEGIN SOLUTION" in instructor
        for body in bodies:
            assert body not in student and body in instructor, tutorial.stem


def test_the_student_tutorial_pages_show_no_graded_code_derivation_or_answer():
    # Tutorial 04 once wrote A2.1's forward as its own `softmax(s)`; tutorial 02 stated the
    # softmax backward; the questions' answers sat in HTML comments the page would carry.
    tutorials = _hook("tutorials")
    graded = {a.text: a.where for a in graded_code(ROOT)}
    derivations = [a.text for a in formulas(ROOT, {})]
    assert len(graded) > 20 and len(derivations) > 10  # something to look for
    pages = {t.stem: t for t in tutorials.find_tutorials(ROOT)}
    for stem, tutorial in pages.items():
        student, _ = tutorials.render(tutorial, solutions=False)
        leaked = [graded[pair] for pair in code_pairs(student) & graded.keys()]
        leaked += [d for d in derivations if d in squeeze(student)]
        assert not leaked and "<!-- ANSWER" not in student, (stem, leaked)
    instructor, _ = tutorials.render(pages["04_attention_step_by_step"], solutions=True)
    assert "<!-- ANSWER" in instructor and "Q.reshape(T, nh, hs).transpose(1, 0, 2)" in instructor
    assert code_pairs(instructor) & graded.keys()  # the search sees the heads' split there


@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_a_pages_graded_derivations_are_for_the_instructors_edition(edition):
    # docs/ops/*.md derive the backwards the assignments ask for, between solution markers.
    editions = _hook("editions")
    config = SimpleNamespace(extra={"edition": edition}, nav=None, docs_dir=ROOT / "docs")
    editions.on_config(config)
    found = 0
    for path in sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text("utf-8")
        lines = text.splitlines()
        regions = [
            r for r in find_regions(lines, str(path), syntax_of(path)) if r.kind == "SOLUTION"
        ]
        if not regions:
            continue
        found += len(regions)
        page = SimpleNamespace(
            file=SimpleNamespace(src_uri=path.relative_to(ROOT / "docs").as_posix())
        )
        shown = editions.on_page_markdown(text, page, config, None)
        for r in regions:
            body = "\n".join(lines[r.begin + 1 : r.end]).strip()
            assert (body in shown) == (edition == "instructor"), (path.name, r.tag)
            stub = f"> **{r.tag}** ("
            assert (stub in shown) == (edition == "student"), (path.name, r.tag)
    assert found >= 10  # softmax, log_softmax, cross_entropy, layer_norm, attention, conv ops
