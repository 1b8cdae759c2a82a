"""MkDocs hook: the student and the instructor editions of the site.

`extra: edition: student` (mkdocs.yml, `make docs`) builds the site students may read: the
instructor's pages, `docs/instructors.md` and each assignment's notes in `docs/course/` (which
describe the hidden tests), are not built at all, not just left out of the navigation. `edition:
instructor` (mkdocs-instructor.yml, `make docs-instructor`) adds them to the Course section.
The tutorials' solutions follow the same setting (docs/hooks/tutorials.py), and so do the
derivations in the pages that are a task's answer (solution regions written as HTML comments,
`<!-- ### BEGIN SOLUTION A2.1 backward -->` ... `<!-- ### END SOLUTION -->`): the students'
edition shows a line naming the task in their place.
"""

from __future__ import annotations

from pathlib import Path

from tinyformer.course.release import strip_page

__all__ = ["INSTRUCTOR_PAGES", "instructor_pages", "is_student"]

INSTRUCTOR_PAGES = ("instructors.md", "course/")
_SECTION = "Course"
_EDITION = ["student"]


def is_student(config) -> bool:
    return (config.extra or {}).get("edition", "student") == "student"


def _instructor_only(src_uri: str) -> bool:
    return src_uri == INSTRUCTOR_PAGES[0] or src_uri.startswith(INSTRUCTOR_PAGES[1])


def _title(page: Path) -> str:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return page.stem


def instructor_pages(docs: Path) -> list[dict]:
    """The nav entries of the instructor's pages that exist under `docs`."""
    entries = []
    if (docs / INSTRUCTOR_PAGES[0]).is_file():
        entries.append({"For instructors": INSTRUCTOR_PAGES[0]})
    for page in sorted((docs / INSTRUCTOR_PAGES[1]).glob("*.md")):
        entries.append({_title(page): page.relative_to(docs).as_posix()})
    return entries


def on_config(config):
    _EDITION[0] = "student" if is_student(config) else "instructor"
    if _EDITION[0] == "student" or config.nav is None:
        return config
    pages = instructor_pages(Path(config.docs_dir))
    if not pages:
        raise ValueError(
            "the instructor's edition needs docs/instructors.md and docs/course/: build it from "
            "the instructor's tree, not from a release"
        )
    for item in config.nav:
        if isinstance(item, dict) and isinstance(item.get(_SECTION), list):
            item[_SECTION].append({"For instructors": pages})
            break
    else:
        config.nav.append({"For instructors": pages})
    return config


def on_files(files, config):
    if _EDITION[0] == "student":
        for file in [f for f in files if _instructor_only(f.src_uri)]:
            files.remove(file)
    return files


def on_page_markdown(markdown, page, config, files):
    if _EDITION[0] != "student" or "### BEGIN SOLUTION" not in markdown:
        return markdown
    return strip_page(markdown, f"docs/{page.file.src_uri}")
