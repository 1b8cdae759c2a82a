"""Drawing a `Graph`: a text tree, and SVG from the layered layout of tinyformer/viz/layout.py.

Data flows top to bottom by default (`direction="LR"`: left to right), so that a transformer
block is a tall, narrow column that fits a notebook's width. Every edge is routed around the
boxes. The residual stream is drawn as what it is: the adds that join a skip edge to a
branch's output sit in one column, joined by thick edges, with the branches beside them. Each
op shows one number for what it saves: the bytes of the new arrays it keeps for backward, as
the memory table (`viz.memory`) counts them; a parameter it keeps is named, not counted (it is
in memory anyway). The layout needs nothing beyond the standard library, so a graph draws
wherever tinyformer runs; Graphviz's `dot` is a system binary pip cannot install.
"""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING

from tinyformer.fileio import save_text
from tinyformer.viz.layout import layered

if TYPE_CHECKING:
    from tinyformer.viz.graph import Graph, Node

__all__ = ["format_bytes", "residual_edges", "save", "saved_line", "text_tree", "to_svg"]

_CHAR_W, _LINE_H, _PAD = 7.0, 14.0, 8.0
_FILL = {"op": "#dbe9f6", "leaf": "#e3f1dc", "module": "#fbe5c8"}
_EDGE, _RESIDUAL = "#555", "#b03a2e"  # a data edge; the residual stream


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def saved_line(node: Node) -> str | None:
    """What a node saves for backward, in the memory table's terms: the bytes of its own
    arrays (`Node.activation_bytes`, the table's row) and the parameters it keeps by name."""
    kept = sorted({s.leaf for s in node.saved if s.leaf}) if node.kind == "op" else []
    if node.kind == "leaf" or not (node.activation_bytes or kept):
        return None
    words = [format_bytes(node.activation_bytes)] if node.activation_bytes else []
    return "saves " + " + ".join(words + ([", ".join(kept)] if kept else []))


def _lines(node: Node) -> list[str]:
    lines = [node.name]
    if node.kind == "module":
        lines.append(f"{node.ops} ops")
    if node.shapes:
        lines.append(node.shape_text)
    if node.kind == "op" and node.module:
        lines.append(f"[{node.module}]")
    saved = saved_line(node)
    if saved:
        lines.append(saved)
    return lines


def text_tree(g: Graph) -> str:
    """The graph from its root back to the leaves; a node reached again is not repeated."""
    out, seen = [], set()
    stack = [(g.root, "", "", True)]
    while stack:
        key, lead, child_lead, _ = stack.pop()
        node = g[key]
        info = " | ".join(_lines(node)[1:])
        again = key in seen
        out.append(f"{lead}{node.name}" + (" (see above)" if again else f"  {info}".rstrip()))
        if again:
            continue
        seen.add(key)
        inputs = g.inputs_of(key)
        for i in reversed(range(len(inputs))):
            last = i == len(inputs) - 1
            branch, extend = ("└── ", "    ") if last else ("├── ", "│   ")
            stack.append((inputs[i].key, child_lead + branch, child_lead + extend, last))
    return "\n".join(out)


def residual_edges(g: Graph) -> set[tuple[int, int]]:
    """The skip edges of residual connections: (a, add) where the add's other input is
    computed from `a` (x + f(x)): the residual stream runs along them."""
    index = {n.key: i for i, n in enumerate(g.nodes)}
    inputs: dict[int, list[int]] = {}
    for a, b in g.edges:
        inputs.setdefault(b, []).append(a)
    above: dict[int, int] = {}  # node -> bitset of the nodes it is computed from
    for node in reversed(g.nodes):  # inputs come after their readers in g.nodes
        bits = 0
        for a in inputs.get(node.key, ()):
            bits |= (1 << index[a]) | above.get(a, 0)
        above[node.key] = bits
    skips = set()
    for node in g.nodes:
        ins = inputs.get(node.key, [])
        if node.kind != "op" or not node.name.startswith("Add") or len(ins) != 2:
            continue
        for a, other in (ins, ins[::-1]):
            if a != other and above.get(other, 0) >> index[a] & 1:
                skips.add((a, node.key))
    return skips


def to_svg(g: Graph, direction: str = "TB") -> str:
    """The graph as an SVG document: data flowing top to bottom (`direction="LR"`: left to
    right), the root outlined, the residual stream in one column of thick edges."""
    sizes = {}
    for node in g.nodes:
        lines = _lines(node)
        sizes[node.key] = (max(map(len, lines)) * _CHAR_W + 2 * _PAD, len(lines) * _LINE_H + _PAD)
    skips = residual_edges(g)
    stream = {k for e in skips for k in e}
    lay = layered([n.key for n in g.nodes], list(g.edges), sizes, skips, direction)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay.width:.0f}" '
        f'height="{lay.height:.0f}" font-family="monospace" font-size="12">',
        "<defs>"
        + "".join(
            f'<marker id="{name}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/>'
            "</marker>"
            for name, colour in (("arrow", _EDGE), ("arrow-residual", _RESIDUAL))
        )
        + "</defs>",
    ]
    for (a, b), points, curved in zip(g.edges, lay.points, lay.curved):
        residual = (a, b) in skips
        colour, width = (_RESIDUAL, 3.0) if residual else (_EDGE, 1.2)
        marker = "arrow-residual" if residual else "arrow"
        parts.append(
            f'<path d="{_path(points, curved, direction)}" fill="none" stroke="{colour}" '
            f'stroke-width="{width}" marker-end="url(#{marker})" data-from="{a}" data-to="{b}"'
            + (' data-residual="1"' if residual else "")
            + "/>"
        )
    for node in g.nodes:
        x, y, w, h = lay.boxes[node.key]
        stroke = (
            f' stroke="{_RESIDUAL}" stroke-width="2.5"' if node.key in stream else ' stroke="#333"'
        )
        if node.key == g.root:
            stroke += ' stroke-width="2.5"' if node.key not in stream else ""
        saved = "" if node.kind == "leaf" else f' data-saved-bytes="{node.activation_bytes}"'
        parts.append(
            f'<g data-key="{node.key}"{saved}><title>{escape(" | ".join(_lines(node)))}</title>'
        )
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
            f'fill="{_FILL[node.kind]}"{stroke}/>'
        )
        for i, line in enumerate(_lines(node)):
            weight = ' font-weight="bold"' if i == 0 else ""
            ty = y + _PAD / 2 + (i + 0.8) * _LINE_H
            parts.append(f'<text x="{x + _PAD:.1f}" y="{ty:.1f}"{weight}>{escape(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _path(points: list[tuple[float, float]], curved: list[bool], direction: str) -> str:
    """SVG path data: straight segments, and across a gap a cubic whose ends run along the
    flow (its control points stay inside the gap, so the curve does too)."""
    (x, y), *rest = points
    d = [f"M{x:.1f},{y:.1f}"]
    for (x1, y1), bend in zip(rest, curved):
        if bend and direction == "TB":
            mid = (y + y1) / 2
            d.append(f"C{x:.1f},{mid:.1f} {x1:.1f},{mid:.1f} {x1:.1f},{y1:.1f}")
        elif bend:
            mid = (x + x1) / 2
            d.append(f"C{mid:.1f},{y:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}")
        else:
            d.append(f"L{x1:.1f},{y1:.1f}")
        x, y = x1, y1
    return " ".join(d)


def save(g: Graph, path: str | os.PathLike, direction: str = "TB") -> None:
    """Write `g` to `path` atomically: SVG for `.svg` (laid out `direction`), the text tree
    for `.txt`."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in (".svg", ".txt"):
        raise ValueError(f"save: path must end in .svg or .txt, got {os.fspath(path)!r}")
    save_text(path, to_svg(g, direction) if ext == ".svg" else text_tree(g) + "\n")
