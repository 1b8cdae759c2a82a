"""bughunt: one op's backward with a planted bug, for a student to find with the gradient checks.

    tinyformer bughunt --op softmax --seed 3            # writes bughunt_softmax.py
    pytest --tinyformer-ops bughunt_softmax.py          # the checks fail: read the report
    (fix the file, run pytest again until it passes)
    tinyformer bughunt --op softmax --seed 3 --reveal   # the planted change, as a diff

The file is the op's own source made standalone (its NumPy references called directly instead of
through the kernel registry, so no kernel stands in for the code under test), with one change in
backward code, of a kind students make:

- sign flip: a returned gradient negated;
- dropped term: one side of a + or - left out;
- missing factor: a constant factor left out (the 2 of d x^2 / dx);
- wrong axis: a reduction over another axis;
- no unbroadcast: the gradient of a broadcast input not summed back to its shape;
- lost transpose: `.T`, `swapaxes`, `moveaxis` or `transpose` left out.

A change is planted only if the checks catch it (some changes are harmless where they land),
and the same op and seed always plant the same change.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import random
import sys
import types
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "Planted", "plant", "standalone_source"]

KINDS = (
    "sign flip", "dropped term", "missing factor", "wrong axis", "no unbroadcast",
    "lost transpose",
)  # fmt: skip
TRANSPOSES = {"swapaxes", "moveaxis", "transpose"}
SAMPLES = 8  # seeded samples a planted change must fail on at least once


@dataclass(frozen=True)
class Planted:
    op: str
    kind: str
    line: int  # in the standalone file
    clean: str  # the standalone source
    buggy: str

    def diff(self) -> str:
        name = f"bughunt_{self.op}.py"
        lines = difflib.unified_diff(
            self.buggy.splitlines(keepends=True),
            self.clean.splitlines(keepends=True),
            f"{name} (as planted)",
            f"{name} (fixed)",
        )
        return "".join(lines)


def _source(op: str) -> str:
    spec = importlib.util.find_spec(f"tinyformer.ops.{op}")
    if spec is None or spec.origin is None or op.startswith("_"):
        import tinyformer.ops

        ops = sorted(p.stem for p in Path(tinyformer.ops.__file__).parent.glob("[!_]*.py"))
        known = ", ".join(ops)
        raise ValueError(f"bughunt: error: no op file tinyformer/ops/{op}.py; ops: {known}")
    return Path(spec.origin).read_text(encoding="utf-8")


class _Text:
    """A source file that nodes can be cut out of and replaced in (ast counts columns in bytes)."""

    def __init__(self, source: str) -> None:
        self.data = source.encode()
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def span(self, node: ast.AST, whole_lines: bool = False) -> tuple[int, int]:
        if whole_lines:  # from the start of the node's first line to the end of its last
            return self.starts[node.lineno - 1], self.starts[node.end_lineno]
        return (
            self.starts[node.lineno - 1] + node.col_offset,
            self.starts[node.end_lineno - 1] + node.end_col_offset,
        )

    def replace(self, edits: list[tuple[tuple[int, int], str]]) -> str:
        """The source with each (start, end) span replaced, applied from the end."""
        data = self.data
        for (start, end), text in sorted(edits, reverse=True):
            data = data[:start] + text.encode() + data[end:]
        return data.decode()


def _is_registry(node: ast.AST, name: str) -> bool:
    """`registry.<name>` or a bare `<name>`."""
    if isinstance(node, ast.Attribute):
        return node.attr == name and getattr(node.value, "id", None) == "registry"
    return isinstance(node, ast.Name) and node.id == name


def standalone_source(op: str) -> str:
    """The op file with its references called directly: `@registry.reference(...)` decorators
    removed, `registry.call("name", ...)` replaced by the reference's function, and no
    primitives named in the specs (there is no kernel to compare)."""
    source = _source(op)
    tree, text = ast.parse(source), _Text(source)
    functions: dict[str, str] = {}  # primitive -> the function that is its reference
    edits: list[tuple[tuple[int, int], str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _is_registry(deco.func, "reference"):
                    functions[deco.args[0].value] = node.name
                    edits.append((text.span(deco, whole_lines=True), ""))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_registry(node.func, "call") and node.args:
            name = node.args[0].value
            if name in functions:
                call = ast.Call(ast.Name(functions[name]), node.args[1:], node.keywords)
                edits.append((text.span(node), ast.unparse(call)))
        if isinstance(node, ast.keyword) and node.arg == "primitives":
            edits.append((text.span(node.value), "()"))
    return text.replace(edits)


def _backward_code(tree: ast.Module) -> list[ast.FunctionDef]:
    """The functions that compute gradients: Function.backward methods and `*_backward`."""
    return [
        n for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and (n.name == "backward" or n.name.endswith("_backward"))
    ]  # fmt: skip


def _sites(tree: ast.Module, source: str) -> list[tuple[str, ast.AST, str]]:
    """Every change that can be planted: (kind, node, its new text)."""

    def text(node: ast.AST) -> str:
        return ast.get_source_segment(source, node)

    sites = []
    for fn in _backward_code(tree):
        for node in ast.walk(fn):
            if isinstance(node, ast.Return) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                for v in values:
                    if not (isinstance(v, ast.Constant) and v.value is None):
                        sites.append(("sign flip", v, f"-({text(v)})"))
            elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
                sites.append(("dropped term", node, text(node.left)))
                if isinstance(node.op, ast.Add):
                    sites.append(("dropped term", node, text(node.right)))
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
                for kept, factor in ((node.left, node.right), (node.right, node.left)):
                    if isinstance(factor, ast.Constant) and isinstance(factor.value, (int, float)):
                        sites.append(("missing factor", node, text(kept)))
            elif isinstance(node, ast.keyword) and node.arg == "axis":
                value = ast.literal_eval(node.value) if _is_literal(node.value) else None
                if isinstance(value, int):
                    sites.append(("wrong axis", node.value, str(0 if value != 0 else -1)))
            elif isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name == "unbroadcast" and node.args:
                    sites.append(("no unbroadcast", node, text(node.args[0])))
                elif name in TRANSPOSES and isinstance(node.func, ast.Attribute):
                    inner = node.func.value if not node.args or name != "moveaxis" else None
                    if getattr(node.func.value, "id", None) == "xp" and node.args:
                        sites.append(("lost transpose", node, text(node.args[0])))
                    elif inner is not None and getattr(inner, "id", None) != "xp":
                        sites.append(("lost transpose", node, text(inner)))
            elif isinstance(node, ast.Attribute) and node.attr == "T":
                sites.append(("lost transpose", node, text(node.value)))
    return sites


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


def _load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses in the file look their module up
    try:
        exec(compile(source, f"{name}.py", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def _caught(source: str, op: str) -> bool:
    """Whether the gradient checks fail on `source`'s specs (a broken forward does not count:
    the bug must be in the backward)."""
    from tinyformer.testing import RandomDraw
    from tinyformer.testing.checks import check_backward

    try:
        specs = _load(source, f"bughunt_{op}").SPECS
    except Exception:
        return False
    for spec in specs:
        for seed in range(SAMPLES):
            try:
                check_backward(spec, RandomDraw(seed))
            except Exception:
                return True
    return False


def plant(op: str, seed: int = 0, kind: str | None = None) -> Planted:
    """A caught change in `op`'s backward, chosen by `seed` (the same op and seed, the same
    change): first a kind of mistake, then a place for it. `kind` asks for one kind. Raises
    ValueError if the op has no backward code or no change of the kind is caught."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"bughunt: error: no kind {kind!r}; kinds: {', '.join(KINDS)}")
    clean = standalone_source(op)
    if _caught(clean, op):
        raise ValueError(f"bughunt: error: {op}'s own checks fail before any change: report it")
    tree, text = ast.parse(clean), _Text(clean)
    rng = random.Random(f"{op}:{seed}")
    by_kind: dict[str, list] = {}
    for site in _sites(tree, clean):
        by_kind.setdefault(site[0], []).append(site)
    kinds = [kind] if kind is not None else sorted(by_kind)
    rng.shuffle(kinds)  # every kind equally likely, however many places each has
    for k in kinds:
        sites = by_kind.get(k, [])
        rng.shuffle(sites)
        for _, node, new in sites:
            buggy = text.replace([(text.span(node), new)])
            if buggy != clean and _caught(buggy, op):
                return Planted(op, k, node.lineno, clean, buggy)
    what = kind or "change"
    raise ValueError(f"bughunt: error: found no {what} to {op}'s backward that its checks catch")


def run_command(
    op: str, seed: int, kind: str | None, out: str, reveal: bool, force: bool = False
) -> int:
    """`tinyformer bughunt`: write the planted file (or, with `reveal`, print the change)."""
    from tinyformer.fileio import atomic_write, check_writable

    path = Path(out) / f"bughunt_{op}.py"
    if not reveal:
        try:  # before planting, which takes seconds
            check_writable(out)
        except OSError as err:
            where = f"{err.strerror}: {err.filename}" if err.filename else str(err)
            print(f"tinyformer bughunt: error: --out {out}: cannot write there ({where})",
                  file=sys.stderr)  # fmt: skip
            return 2
    try:
        planted = plant(op, seed, kind)
    except ValueError as err:
        print(f"tinyformer {err}", file=sys.stderr)
        return 2
    if reveal:
        print(f"The planted change in {path.name} (seed {seed}): {planted.kind}, line "
              f"{planted.line}. The fix:\n")  # fmt: skip
        print(planted.diff())
        return 0
    try:
        if path.exists() and not force and path.read_text(encoding="utf-8") != planted.buggy:
            print(f"tinyformer bughunt: error: {path} exists and differs from the planted "
                  "file (a fix in progress?); move it away, or pass --force",
                  file=sys.stderr)  # fmt: skip
            return 2
        atomic_write(path, lambda f: f.write(planted.buggy))
    except (OSError, UnicodeDecodeError) as err:  # a folder of that name, a file not text
        print(f"tinyformer bughunt: error: cannot write {path}: {err}", file=sys.stderr)
        return 2
    print(
        f"{path}: {op} with one bug planted in its backward. Find it with the checks:\n"
        f"  pytest --tinyformer-ops {path}\n"
        f"read the report, fix the file, run them again until they pass. To see the change:\n"
        f"  tinyformer bughunt --op {op} --seed {seed} --reveal"
    )
    return 0
