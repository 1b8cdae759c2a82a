"""A student's workspace: START_HERE.md and the README's first command, `assignment sync`
carrying their code from one release to the next, and the check that `import tinyformer`
loads the folder being edited.

Releases A1 and A2 are made once for the module (A1 has no grading data to compute).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import tinyformer
from tinyformer.cli import main
from tinyformer.course import workspace
from tinyformer.course.definition import COURSE
from tinyformer.course.release import MANIFEST, release
from tinyformer.course.sync import sync

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
UNBROADCAST = 'raise NotImplementedError("A1.3: unbroadcast — see docs/architecture.md")'
MINE = "return g.sum(axis=tuple(range(g.ndim - len(shape))), keepdims=False)  # mine"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("made")
    return {name: release(name, root / name).out for name in ("A1", "A2")}


@pytest.fixture
def student(made, tmp_path) -> dict[str, Path]:
    """Copies of the releases that a test may edit, side by side as a student keeps them."""
    return {name: Path(shutil.copytree(tree, tmp_path / name)) for name, tree in made.items()}


def test_start_here_names_the_files_the_command_and_what_to_submit(made):
    text = (made["A2"] / "START_HERE.md").read_text("utf-8")
    assert 'pip install -e ".[course]"' in text and "tinyformer grade A2 ." in text
    assert "| A2.4 | layer_norm | `tinyformer/ops/layer_norm.py` | 7 |" in text
    assert "tinyformer assignment sync --from ../A1 --to ." in text
    assert "- `assignments/A2_softmax_layernorm.py`" in text
    assert "first assignment" in (made["A1"] / "START_HERE.md").read_text("utf-8")


def test_the_readme_starts_with_the_release_and_a_command_that_works(made):
    readme = (made["A2"] / "README.md").read_text("utf-8")
    first = re.search(r"```bash\n(.*?)\n", readme).group(1)
    assert readme.startswith("# tinyformer: assignment A2 (student release)")
    assert first == 'pip install -e ".[course]" && python -m tinyformer.course.workspace'
    assert '"course": [' in (made["A2"] / "setup.py").read_text("utf-8")  # the extra exists


def test_sync_carries_the_students_earlier_code_and_nothing_else(student, capsys):
    a1, a2 = student["A1"], student["A2"]
    mine = a1 / "tinyformer/course/assignments/a1/autograd.py"
    assert UNBROADCAST in mine.read_text("utf-8")
    mine.write_text(mine.read_text("utf-8").replace(UNBROADCAST, MINE))
    exercise = a1 / "tutorials/05_positional_encodings.py"
    ours = exercise.read_text("utf-8").replace("raise NotImplementedError(", "print(", 1)
    exercise.write_text(ours)
    early = a1 / "tinyformer/ops/softmax.py"  # A2's code, written before A2's release: not due
    early.write_text(early.read_text("utf-8").replace("raise NotImplementedError(", "print("))
    softmax_before = (a2 / "tinyformer/ops/softmax.py").read_text("utf-8")

    assert main(["assignment", "sync", "--from", str(a1), "--to", str(a2)]) == 0
    assert "regions: A1.3 x1, tutorial x1" in capsys.readouterr().out
    carried = (a2 / "tinyformer/course/assignments/a1/autograd.py").read_text("utf-8")
    assert f"    ### BEGIN YOUR CODE A1.3\n    {MINE}\n    ### END YOUR CODE\n" in carried
    assert (
        'raise NotImplementedError("A1.2: backward topological_sort' in carried
    )  # left a stub there
    assert (a2 / "tutorials/05_positional_encodings.py").read_text("utf-8") == ours
    assert (a2 / "tinyformer/ops/softmax.py").read_text("utf-8") == softmax_before
    assert (a2 / "assignments/A1_autograd.py").is_file()  # the earlier notebook, the student's own


def test_sync_leaves_a_file_whose_markers_the_student_broke(student):
    a1, a2 = student["A1"], student["A2"]
    mine = a1 / "tinyformer/course/assignments/a1/autograd.py"
    mine.write_text(mine.read_text("utf-8").replace("    ### END YOUR CODE\n", "", 1))
    before = (a2 / "tinyformer/course/assignments/a1/autograd.py").read_text("utf-8")
    report = sync(a1, a2)
    assert any("a1/autograd.py" in p and "left as released" in p for p in report.problems)
    assert (a2 / "tinyformer/course/assignments/a1/autograd.py").read_text("utf-8") == before


def test_sync_refuses_folders_that_are_not_releases(student, tmp_path, capsys):
    assert main(["assignment", "sync", "--from", str(tmp_path), "--to", str(student["A2"])]) == 2
    assert MANIFEST in capsys.readouterr().err
    meta = json.loads((student["A2"] / MANIFEST).read_text("utf-8"))
    assert meta["assignment"] == "A2" and meta["due"] == ["A1"] and not meta["carry_solutions"]


def test_sync_names_the_folder_to_rename_in_a_release_from_before_the_move(student, capsys):
    # A release made while the handouts lived in course/ holds its manifest there.
    old = student["A1"]
    (old / MANIFEST).parent.rename(old / "course")
    assert main(["assignment", "sync", "--from", str(old), "--to", str(student["A2"])]) == 2
    assert "rename its course/ folder to assignments/" in capsys.readouterr().err


def _fake_tree(root: Path) -> Path:
    (root / "tinyformer").mkdir(parents=True)
    (root / "tinyformer" / "__init__.py").write_text("")
    (root / "setup.py").write_text("")
    (root / MANIFEST).parent.mkdir()
    (root / MANIFEST).write_text('{"assignment": "A2"}')
    return root


def test_workspace_check_stops_a_notebook_of_another_tree(tmp_path, capsys):
    other = _fake_tree(tmp_path / "A2")
    with pytest.raises(workspace.WorkspaceError) as err:
        workspace.check(other / "assignments")
    message = str(err.value)
    assert f"not the folder you are working in, {other} (A2's release)" in message
    assert f"cd {other} && pip install -e ." in message and str(INSTRUCTOR) in message
    assert workspace.check(other, strict=False) == other
    assert "!!!!" in capsys.readouterr().err
    assert workspace.mismatch(other) is not None and workspace.mismatch(INSTRUCTOR) is None


def test_workspace_check_passes_in_the_imported_tree(tmp_path, capsys):
    assert workspace.check(INSTRUCTOR / "assignments") == INSTRUCTOR
    assert workspace.check(tmp_path) is None  # in no tinyformer tree: nothing to compare
    assert workspace.main([str(INSTRUCTOR)]) == 0
    assert workspace.main([str(_fake_tree(tmp_path / "A3"))]) == 1
    assert workspace.main([str(tmp_path / "A3" / "..")]) == 2


def test_every_course_notebook_checks_its_workspace_first():
    notebooks = sorted((INSTRUCTOR / "assignments").glob("A*.py"))
    assert len(notebooks) == len(COURSE)  # an empty glob would pass vacuously
    for notebook in notebooks:
        text = notebook.read_text("utf-8")
        first_cell = text.split("\n# %%\n")[1].split("\n# %%")[0]
        assert "workspace.check()" in first_cell, notebook.name


def _nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    items = nav.values() if isinstance(nav, dict) else nav
    return [page for item in items for page in _nav_pages(item)]


def test_the_release_builds_the_students_site(made):
    # What `make docs` needs in a release, without the build: its config loads (hooks and
    # all) as the student edition, and every page of its nav is in the release (the tutorials'
    # pages are generated by the hook), while the instructor's pages are not.
    from mkdocs.config import load_config

    tree = made["A2"]
    config = load_config(config_file=str(tree / "mkdocs.yml"))
    assert config.extra["edition"] == "student" and config.strict
    missing = [
        page
        for page in _nav_pages(config.nav)
        if not page.startswith("tutorials/") and not (tree / "docs" / page).is_file()
    ]
    assert not missing, missing
    assert not (tree / "docs/instructors.md").exists() and not (tree / "docs/course").exists()
    assert "docs:" in (tree / "Makefile").read_text("utf-8")


def test_grade_warns_when_the_imported_tinyformer_is_not_the_tree(tmp_path, monkeypatch, capsys):
    """`tinyformer grade A2 rel/A2` builds its pristine tree from the imported tinyformer: when
    that is another folder (a later release installed last), it says so loudly."""
    import types

    from tinyformer.cli import main
    from tinyformer.course import grader

    tree = tmp_path / "rel"
    (tree / "tinyformer").mkdir(parents=True)
    (tree / "tinyformer" / "__init__.py").write_text("")
    fake = types.SimpleNamespace(assignment="A2", tree=tree, data_source="x", table=lambda: "")
    monkeypatch.setattr(grader, "grade", lambda *a, **k: fake)  # the command's grade
    assert main(["grade", "A2", str(tree)]) == 0
    assert "not the folder you are working in" in capsys.readouterr().err
