"""The import map of `tinyformer/train/`: no circle inside it.

A command with helpers is a folder whose config is a leaf (`train/rlhf/config.py` imports
nothing from its siblings), so the helpers can annotate with the config without importing
the command back. Every import counts here, those under TYPE_CHECKING and inside functions
too: an import made only for an annotation is still an edge a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

TRAIN = Path(__file__).resolve().parent.parent / "tinyformer" / "train"


def _module(path: Path) -> str:
    parts = path.relative_to(TRAIN.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_map() -> dict[str, set[str]]:
    """tinyformer.train module -> the tinyformer.train modules it imports."""
    modules = {_module(p): p for p in TRAIN.rglob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from package import module` names the module, `from module import x` the module
                targets = [
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                    else node.module
                    for a in node.names
                ]  # fmt: skip
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def _circle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of `edges` (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_circle_finder_finds_a_circle():
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_circle_inside_train():
    edges = _import_map()
    # the map is read: the commands import the shared loop, the folders their config
    assert "tinyformer.train.loop" in edges["tinyformer.train.gpt"]
    assert "tinyformer.train.rlhf.config" in edges["tinyformer.train.rlhf.ppo"]
    circle = _circle(edges)
    assert circle is None, "an import circle inside tinyformer/train: " + " -> ".join(circle)


def test_a_command_folders_config_imports_none_of_its_siblings():
    edges = _import_map()
    configs = [name for name in edges if name.endswith(".config")]
    assert len(configs) >= 8
    for config in configs:
        folder = config.rsplit(".", 1)[0]
        siblings = {m for m in edges[config] if m == folder or m.startswith(folder + ".")}
        assert not siblings, f"{config} imports {sorted(siblings)}"
