"""The core's import map: one seam, and an engine that never needs Tensor.

The engine (`engine.py`) reads before `tensor.py` and knows a tensor only by its `grad_fn`; the
one import that goes back up the reading order is the last line of `tensor.py` (Tensor's
methods call the ops, which need Tensor); no core file hides an import inside a function.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tinyformer"
CORE = [
    "backend.py", "versions.py", "grad_mode.py", "indexing.py", "engine.py",
    "tensor.py", "array_facts.py", "inplace.py", "torch_names.py", "creation.py", "autograd.py",
    "opspec.py",
]  # fmt: skip
TESTING = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "testing").glob("*.py"))
# importing a module named by a string hides the edge from every import map (asking whether an
# optional library is installed, `importlib.util.find_spec`, imports nothing and is fine)
BY_NAME = ("importlib.import_module", "__import__", "exec_module", "import_module")


def _runtime_imports(tree: ast.Module) -> list[tuple[ast.stmt, bool]]:
    """(import statement, at module level?) for every import that runs (not TYPE_CHECKING)."""
    found = []

    def walk(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, top))
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            walk(child, top and not inner)

    walk(tree, True)
    return found


def _names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    base = stmt.module or ""
    return [base, *(f"{base}.{a.name}" for a in stmt.names)]


@pytest.mark.parametrize("name", CORE)
def test_no_core_file_defers_an_import(name):
    tree = ast.parse((PACKAGE / name).read_text(encoding="utf-8"))
    # (optional libraries such as CuPy are imported when first needed, and that is fine)
    deferred = [
        s.lineno
        for s, top in _runtime_imports(tree)
        if not top and any(n.startswith("tinyformer") for n in _names(s))
    ]
    assert not deferred, f"tinyformer/{name}: tinyformer imported inside functions at {deferred}"


def test_the_engine_never_imports_tensor_or_autograd():
    tree = ast.parse((PACKAGE / "engine.py").read_text(encoding="utf-8"))
    names = [n for s, _ in _runtime_imports(tree) for n in _names(s)]
    assert not [n for n in names if n.startswith(("tinyformer.tensor", "tinyformer.autograd"))]


def test_the_one_seam_is_tensor_py_last_line():
    lines = (PACKAGE / "tensor.py").read_text(encoding="utf-8").rstrip().splitlines()
    tree = ast.parse("\n".join(lines))
    ops = [s for s, _ in _runtime_imports(tree) if any(".ops" in n or n == "tinyformer.ops"
                                                        for n in _names(s))]  # fmt: skip
    assert len(ops) == 1 and ops[0].lineno == len(lines), "tensor.py imports the ops elsewhere"


@pytest.mark.parametrize("name", CORE + TESTING)
def test_no_core_or_testing_file_imports_by_name(name):
    source = (PACKAGE / name).read_text(encoding="utf-8")
    tree = ast.parse(source)
    calls = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    hidden = [c for c in calls if c.endswith(BY_NAME)]
    getattr_hook = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                    and n.name == "__getattr__"]  # fmt: skip
    assert not hidden and not getattr_hook, (
        f"tinyformer/{name} imports by name: {hidden + getattr_hook}"
    )


def test_no_op_imports_the_testing_package():
    # the spec type sits below the ops (`tinyformer.opspec`); the testing package sits above them
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        names = [n for s, _ in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))
                 for n in _names(s)]  # fmt: skip
        assert not [n for n in names if n.startswith("tinyformer.testing")], path.name


def test_the_catalog_reads_every_op_file_that_declares_specs():
    from tinyformer.testing import all_specs

    declared = sorted(
        p.stem for p in (PACKAGE / "ops").glob("*.py") if "\nSPECS" in p.read_text(encoding="utf-8")
    )
    read = sorted({s.fn.__module__.rsplit(".", 1)[-1] for s in all_specs()})
    assert read == declared, "an op file's wrapper is not imported in tinyformer/ops/__init__.py"


# -- README's promise: the spine never needs a wing ----------------------------------------------

ROOT = PACKAGE.parent


def _layout() -> dict[Path, str]:
    """README's layout table: each listed file or folder -> "spine" or "wing"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rooms: dict[Path, str] = {}
    for kind, paths in re.findall(r"^\| (spine|wing) \| ([^|]*) \|", text, re.M):
        for name in re.findall(r"`([^`]+)`", paths):
            name = name.rstrip("/")
            base = ROOT if name.startswith(("tinyformer/", "kernels")) else PACKAGE
            rooms[base / name] = kind
    return rooms


def _kind(path: Path, rooms: dict[Path, str]) -> str | None:
    """The kind of the innermost listed file or folder holding `path`."""
    for room in [path, *path.parents]:
        if room in rooms:
            return rooms[room]
    return None


def _file_of(module: str) -> Path | None:
    parts = module.split(".")
    if parts[:2] == ["tinyformer", "kernels"]:
        parts = parts[1:]
        base = ROOT
    elif parts[0] == "tinyformer":
        parts = parts[1:]
        base = PACKAGE
    else:
        return None
    while parts:
        stem = base.joinpath(*parts)
        for path in (stem.with_suffix(".py"), stem / "__init__.py"):
            if path.exists():
                return path
        parts = parts[:-1]
    return None


def _spine_files(rooms: dict[Path, str]) -> list[Path]:
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]
    return sorted(f for f in files if _kind(f, rooms) == "spine")


def test_the_layout_table_classifies_the_core():
    rooms = _layout()
    assert all(_kind(PACKAGE / name, rooms) == "spine" for name in CORE)
    assert _kind(PACKAGE / "fake_device.py", rooms) == "wing"


def test_no_spine_file_imports_a_wing_at_module_level():
    # importing any spine module loads no wing; the command line may start a wing's command
    # (`tinyformer doctor`) inside the function that runs it, and the package's face
    # (`tinyformer/__init__.py`, in no room) loads the wings users reach as `tf.*`
    rooms = _layout()
    found: dict[str, list[str]] = {}
    for path in _spine_files(rooms):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for stmt, top in _runtime_imports(tree):
            targets = {_file_of(n) for n in _names(stmt)} - {None}
            wings = sorted(str(t.relative_to(ROOT)) for t in targets if _kind(t, rooms) == "wing")
            if top and wings:
                found.setdefault(str(path.relative_to(ROOT)), []).append(f"{stmt.lineno}: {wings}")
    assert not found, f"the spine imports a wing: {found}"


def test_importing_tinyformer_nn_loads_no_distributed_code():
    # `nn.parallel` is the distributed wing's alias: nn itself never imports it
    code = (
        "import sys, tinyformer.nn, tinyformer.models\n"
        "print('tinyformer.distributed' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_engine_states_its_contract_instead_of_importing_tensor_for_type_hints():
    tree = ast.parse((PACKAGE / "engine.py").read_text(encoding="utf-8"))
    imported = [
        n for s in ast.walk(tree) if isinstance(s, (ast.Import, ast.ImportFrom)) for n in _names(s)
    ]  # fmt: skip (TYPE_CHECKING blocks included)
    assert not [n for n in imported if n.startswith(("tinyformer.tensor", "tinyformer.autograd"))]
    import tinyformer as tf
    from tinyformer import engine

    x = tf.randn(3, requires_grad=True)
    y = (x * x).sum()
    assert isinstance(x, engine.Variable) and isinstance(y, engine.Variable)
    assert isinstance(y.grad_fn.function, engine.BackwardFunction)
    assert not isinstance(x.data, engine.Variable)  # an array has no node


# -- Room by room: one circle, the seam ---------------------------------------------------------


def _room(path: Path) -> str:
    """The room of a file: `kernels`, or the top-level file or folder of the package."""
    if PACKAGE not in path.parents:
        return "kernels"
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _room_edges() -> dict[str, set[str]]:
    """Room -> the rooms its modules import at module level (the package's face excluded)."""
    edges: dict[str, set[str]] = {}
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "kernels").rglob("*.py")]:
        room = _room(path)
        for stmt, top in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in filter(None, (_file_of(n) for n in _names(stmt) if top)):
                if _room(target) not in (room, "__init__") and room != "__init__":
                    edges.setdefault(room, set()).add(_room(target))
    return edges


def _circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The rooms that reach each other (strongly connected sets of two or more)."""
    reach: dict[str, set[str]] = {}
    for start in edges:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    found: list[set[str]] = []
    for a in reach:
        circle = {a} | {b for b in reach[a] if a in reach.get(b, ())}
        if len(circle) > 1 and circle not in found:
            found.append(circle)
    return found


def test_the_rooms_import_each_other_in_one_circle_the_seam():
    # Drawn room by room, the module-level imports go one way but for tensor.py's last line:
    # without that edge there is no circle at all.
    edges = _room_edges()
    assert _circles(edges) == [{"autograd", "ops", "tensor"}], _circles(edges)
    edges["tensor"].discard("ops")
    assert _circles(edges) == [], "a back-edge besides the seam"
