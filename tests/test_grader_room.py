"""The grader's room: only its child process ever loads code from the tree it grades.

`tinyformer/course/grader/` runs the instructor's code in this process and the student's in a
child (`_child.py`, a script run in the graded tree). The rule the static test holds every other
module of the grader to, read from its syntax tree:

- no use of `sys.path`, `sys.meta_path`, `sys.path_hooks`, `sys.path_importer_cache` or
  `sys.modules` (nor a `from sys import` of them): the parent's import path is the
  instructor's, so a fixed `tinyformer.*` name always loads the instructor's module;
- no call of `exec`, `eval`, `compile` or `__import__`, nor of `import_module`, `reload`,
  `run_module`, `run_path`, `spec_from_file_location`, `spec_from_loader`,
  `module_from_spec`, `exec_module`, `load_module`, `SourceFileLoader` or `addsitedir` by any
  name or attribute, nor an import of them under another name; except `import_module(...)` and
  `__import__(...)` whose first argument is a string literal naming a `tinyformer.*` module.

(`importlib.util.find_spec` locates a module without running it and stays allowed: the grader
asks it where the running tinyformer and NumPy are.) The checks modules the parent imports are
named by `Assignment.checks`, which must name a module of `tinyformer.course.assignments`, and
`Assignment.checks_module()` imports them from the running tinyformer.

The dynamic test grades a tree and then looks at every module this process has loaded.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

import tinyformer
from tinyformer.course import COURSE
from tinyformer.course.definition import CHECKS_PACKAGE
from tinyformer.course.grader.grade import grade

INSTRUCTOR = Path(tinyformer.__file__).resolve().parent.parent
GRADER = INSTRUCTOR / "tinyformer" / "course" / "grader"
ASSIGNMENTS = INSTRUCTOR / "tinyformer" / "course" / "assignments"
CHILD = "_child.py"  # the one module that runs in the graded tree

IMPORT_PATH = {"path", "meta_path", "path_hooks", "path_importer_cache", "modules"}
BUILTINS = {"exec", "eval", "compile", "__import__"}
LOADERS = {
    "import_module", "reload", "run_module", "run_path", "spec_from_file_location",
    "spec_from_loader", "module_from_spec", "exec_module", "load_module", "SourceFileLoader",
    "addsitedir", "__import__",
}  # fmt: skip
BY_FIXED_NAME = {"import_module", "__import__"}


def _fixed_tinyformer_name(call: ast.Call) -> bool:
    first = call.args[0] if call.args else None
    return (
        isinstance(first, ast.Constant)
        and isinstance(first.value, str)
        and first.value.startswith("tinyformer.")
    )


def room_violations(source: str, where: str = "<module>") -> list[str]:
    """What in `source` breaks the grader's rule (see the module's docstring), one line each."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
            and node.attr in IMPORT_PATH
        ):
            found.append(f"{line}: sys.{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if node.module == "sys" and names & IMPORT_PATH:
                found.append(f"{line}: from sys import {', '.join(sorted(names & IMPORT_PATH))}")
            if names & (LOADERS | BUILTINS):
                found.append(f"{line}: from {node.module} import {sorted(names & LOADERS)}")
        elif isinstance(node, ast.Import):
            found += [f"{line}: import runpy" for a in node.names if a.name == "runpy"]
        elif isinstance(node, ast.Call):
            f = node.func
            name = (
                f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            )
            bare = isinstance(f, ast.Name)
            if name in LOADERS or (bare and name in BUILTINS):
                if name in BY_FIXED_NAME and _fixed_tinyformer_name(node):
                    continue
                found.append(f"{line}: {ast.unparse(f)}(...)")
    return found


def _grader_modules() -> list[Path]:
    return sorted(p for p in GRADER.glob("*.py") if p.name != CHILD)


def test_the_grader_has_the_modules_this_test_reads():
    names = {p.name for p in _grader_modules()}
    assert {"grade.py", "_verdicts.py", "_tree.py", "_sandbox.py", "data.py"} <= names
    assert (GRADER / CHILD).is_file()


@pytest.mark.parametrize("path", _grader_modules(), ids=lambda p: p.name)
def test_no_grader_module_but_the_child_loads_code_by_path_or_name(path):
    source = path.read_text(encoding="utf-8")
    assert room_violations(source, path.name) == []


RELEASE_TOOLING = ("release", "sync", "handout", "workspace", "autograder", "cli")


@pytest.mark.parametrize("path", sorted(GRADER.glob("*.py")), ids=lambda p: p.name)
def test_the_grader_imports_none_of_the_release_tooling(path):
    # the release imports the grader (its data), never the other way round
    tooling = {f"tinyformer.course.{name}" for name in RELEASE_TOOLING}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            modules = {a.name for a in node.names}
        else:
            continue
        found += sorted(m for m in modules if m in tooling)
    assert found == [], f"{path.name} imports {found}"


PLANTS = {
    "import_module": "import importlib\n\ndef f(name):\n    return importlib.import_module(name)\n",
    "from-import alias": "from importlib import import_module as im\n",
    "__import__": "def f(name):\n    return __import__(name)\n",
    "sys.path": "import sys\n\ndef f(tree):\n    sys.path.insert(0, str(tree))\n",
    "sys.modules": "import sys\n\ndef f(m):\n    sys.modules['tinyformer.x'] = m\n",
    "run_path": "import runpy\n\ndef f(p):\n    return runpy.run_path(p)\n",
    "spec_from_file_location": (
        "import importlib.util as u\n\ndef f(p):\n"
        "    s = u.spec_from_file_location('m', p)\n"
        "    s.loader.exec_module(u.module_from_spec(s))\n"
    ),
    "exec": "def f(text):\n    exec(text, {})\n",
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_the_rule_catches_an_import_planted_in_verdicts(plant):
    # a loader planted into a real grader module is reported, with its line
    source = (GRADER / "_verdicts.py").read_text(encoding="utf-8")
    assert room_violations(source, "_verdicts.py") == []
    planted = room_violations(source + "\n\n" + PLANTS[plant], "_verdicts.py")
    assert planted and all(v.startswith("_verdicts.py:") for v in planted), planted


def test_the_rule_allows_a_fixed_tinyformer_name():
    fixed = "import importlib\n\nm = importlib.import_module('tinyformer.testing')\n"
    assert room_violations(fixed) == []
    assert room_violations(fixed.replace("'tinyformer.testing'", "'numpy'")) != []
    # find_spec only locates (the tree's kernels, NumPy's folder)
    assert room_violations("import importlib.util\n\nimportlib.util.find_spec('numpy')\n") == []


def _loaded_from(folder: Path) -> list[str]:
    """The modules of this process whose file is inside `folder`."""
    folder = folder.resolve()
    found = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(folder):
            found.append(name)
    return found


def test_a_grade_loads_no_module_of_the_tree_it_grades(tmp_path, monkeypatch):
    # The room (the pristine tree with the student's files) and the submission both sit in
    # tmp_path; after a real grade of A1.1, whose tests drive the student's `Value` in the child,
    # no module of this process comes from either.
    room = tmp_path / "rooms"
    room.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(room))
    sub = tmp_path / "sub"
    sub.mkdir()
    solution = ASSIGNMENTS / "a1" / "autograd.py"
    (sub / "autograd.py").write_text(solution.read_text(encoding="utf-8"), encoding="utf-8")
    result = grade("A1", sub, tasks=["A1.1"], timeout=60)
    assert result.results and result.score == result.max_score, result.table()
    assert _loaded_from(tmp_path) == []
    # ...and the check sees a module that was loaded from there
    spec = importlib.util.spec_from_file_location("_room_probe", sub / "autograd.py")
    probe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_room_probe", probe)
    spec.loader.exec_module(probe)
    assert _loaded_from(tmp_path) == ["_room_probe"]


@pytest.mark.parametrize("name", list(COURSE))
def test_each_assignment_has_its_folder_and_checks_module(name):
    a = COURSE[name]
    folder = ASSIGNMENTS / name.lower()
    assert (folder / "__init__.py").is_file(), f"{name}: no package {folder}"
    if a.checks is not None:
        assert a.checks == f"{CHECKS_PACKAGE}{name.lower()}.checks"
        assert a.checks_file() == folder / "checks.py"
        module = a.checks_module()
        assert Path(module.__file__).resolve() == folder / "checks.py"
        assert isinstance(getattr(module, "PROPERTIES", None), dict)
    course_files = [f for f in a.files if f.startswith("tinyformer/course/")]
    prefix = f"tinyformer/course/assignments/{name.lower()}/"
    assert all(f.startswith(prefix) for f in course_files), course_files


def test_no_assignment_package_imports_its_modules():
    # importing a5/kernels.py registers kernels for the whole process: a package's
    # __init__ must not import its siblings (nor anything: the checks are imported on demand)
    inits = [ASSIGNMENTS / "__init__.py", *sorted(ASSIGNMENTS.glob("*/__init__.py"))]
    assert len(inits) == len(COURSE) + 1
    for init in inits:
        tree = ast.parse(init.read_text(encoding="utf-8"))
        imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
        assert imports == [], f"{init.relative_to(INSTRUCTOR)} imports {ast.unparse(imports[0])}"


def test_the_children_of_a_grade_share_one_cache_in_its_room(tmp_path):
    # Numba's and the CUDA emulator's: A5.3's hidden tests load the build its visible checks
    # made, instead of compiling softmax.cu again in a HOME of their own.
    from tinyformer.course.grader._sandbox import Child, Limits

    child = Child(tmp_path / "tree", tmp_path / "deps", tmp_path, Limits(10.0), True, set())
    env = child._environment(tmp_path / "work")
    assert env["TINYFORMER_CACHE"] == env["NUMBA_CACHE_DIR"]
    assert (
        Path(env["TINYFORMER_CACHE"]).parent == tmp_path and env["HOME"] != env["TINYFORMER_CACHE"]
    )


def test_the_graded_tree_is_compiled_but_for_the_students_files(tmp_path):
    # Children cannot write to the tree, so without the grader's compile each one compiled the
    # library from source; the student's files are left to the child.
    from tinyformer.course.grader import _tree

    a = COURSE["A2"]
    student = {rel: b"x = 1\n" for rel in a.files}
    for dest in (tmp_path / "first", tmp_path / "second"):  # the second from the first's compile
        _tree.build_tree(a, dest, student, False)
        _tree.compile_library(a, dest)
        for rel in a.files:
            assert not Path(importlib.util.cache_from_source(str(dest / rel))).exists(), rel
        source = dest / "tinyformer" / "ops" / "shared.py"
        data = Path(importlib.util.cache_from_source(str(source))).read_bytes()
        assert int.from_bytes(data[4:8], "little") == 0b11  # hash-based, checked at import
        assert data[8:16] == importlib.util.source_hash(source.read_bytes())
