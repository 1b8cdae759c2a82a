"""Drawing a `Graph`: a text tree, and SVG from a small layered layout written here.

The layout is the classic layered one (Sugiyama's, much simplified): every op sits one column
right of its latest input, every leaf one column left of its first reader, and a few sweeps
order each column by the mean position of its neighbours (the barycentre heuristic), which
removes most crossings in graphs of this size. It needs nothing beyond the standard library,
so a graph draws wherever tinyformer runs; Graphviz's `dot` lays out large graphs better but
is a system binary that pip cannot install, so it is not used here.
"""

from __future__ import annotations

import os
from html import escape
from typing import TYPE_CHECKING

from tinyformer.fileio import save_text

if TYPE_CHECKING:
    from tinyformer.viz.graph import Graph, Node

__all__ = ["format_bytes", "save", "text_tree", "to_svg"]

_CHAR_W, _LINE_H, _PAD, _GAP_X, _GAP_Y = 7.0, 14.0, 8.0, 48.0, 14.0
_FILL = {"op": "#dbe9f6", "leaf": "#e3f1dc", "module": "#fbe5c8"}


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _lines(node: Node) -> list[str]:
    lines = [node.name]
    if node.kind == "module":
        lines.append(f"{node.ops} ops")
    if node.shapes:
        lines.append(node.shape_text)
    if node.kind == "op" and node.module:
        lines.append(f"[{node.module}]")
    if node.kind == "op" and node.saved_bytes:  # all it saved, parameters' data included
        lines.append(f"saves {format_bytes(node.saved_bytes)}")
    if node.kind == "module" and node.saved_bytes:  # its ops' activations, parameters apart
        lines.append(f"activations {format_bytes(node.saved_bytes)}")
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


def _ranks(g: Graph) -> dict[int, int]:
    """Column of each node: ops right of their latest input, leaves left of their first reader."""
    inputs: dict[int, list[int]] = {n.key: [] for n in g.nodes}
    readers: dict[int, list[int]] = {n.key: [] for n in g.nodes}
    for a, b in g.edges:
        inputs[b].append(a)
        readers[a].append(b)
    rank: dict[int, int] = {}
    pending = {k: len(v) for k, v in inputs.items()}
    ready = [n.key for n in reversed(g.nodes) if pending[n.key] == 0]
    while len(rank) < len(g.nodes):
        if not ready:  # a cycle between collapsed modules: break it at the earliest node
            ready = [next(n.key for n in reversed(g.nodes) if n.key not in rank)]
        key = ready.pop()
        if key in rank:
            continue
        rank[key] = 1 + max((rank[a] for a in inputs[key] if a in rank), default=-1)
        for b in readers[key]:
            pending[b] -= 1
            if pending[b] == 0:
                ready.append(b)
    for key, ins in inputs.items():  # sources (leaves) next to their first reader
        if not ins and readers[key]:
            rank[key] = max(0, min(rank[b] for b in readers[key]) - 1)
    return rank


def _order(g: Graph, rank: dict[int, int]) -> list[list[int]]:
    columns: list[list[int]] = [[] for _ in range(max(rank.values()) + 1)]
    for node in reversed(g.nodes):
        columns[rank[node.key]].append(node.key)
    neighbours: dict[int, list[int]] = {n.key: [] for n in g.nodes}
    for a, b in g.edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    for _ in range(4):
        place = {k: i for col in columns for i, k in enumerate(col)}
        for col in columns:
            col.sort(key=lambda k: sum(place[n] for n in neighbours[k]) / len(neighbours[k] or [0]))
    return columns


def to_svg(g: Graph) -> str:
    """The graph as an SVG document, data flowing left to right, the root outlined."""
    rank = _ranks(g)
    columns = _order(g, rank)
    size = {}
    for node in g.nodes:
        lines = _lines(node)
        size[node.key] = (max(map(len, lines)) * _CHAR_W + 2 * _PAD, len(lines) * _LINE_H + _PAD)
    heights = [sum(size[k][1] for k in col) + _GAP_Y * (len(col) - 1) for col in columns]
    height = max(heights) + 2 * _PAD
    pos: dict[int, tuple[float, float]] = {}
    x = _PAD
    for col, col_h in zip(columns, heights):
        width = max((size[k][0] for k in col), default=0)
        y = (height - col_h) / 2
        for key in col:
            pos[key] = (x + (width - size[key][0]) / 2, y)
            y += size[key][1] + _GAP_Y
        x += width + _GAP_X
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{x - _GAP_X + _PAD:.0f}" '
        f'height="{height:.0f}" font-family="monospace" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
    ]
    for a, b in g.edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x0, y0 = xa + size[a][0], ya + size[a][1] / 2
        x1, y1 = xb, yb + size[b][1] / 2
        mid = (x0 + x1) / 2
        parts.append(
            f'<path d="M{x0:.1f},{y0:.1f} C{mid:.1f},{y0:.1f} {mid:.1f},{y1:.1f} {x1:.1f},{y1:.1f}"'
            ' fill="none" stroke="#555" marker-end="url(#arrow)"/>'
        )
    for node in g.nodes:
        (nx, ny), (w, h) = pos[node.key], size[node.key]
        stroke = ' stroke-width="2.5"' if node.key == g.root else ""
        parts.append(f"<g><title>{escape(' | '.join(_lines(node)))}</title>")
        parts.append(
            f'<rect x="{nx:.1f}" y="{ny:.1f}" width="{w:.1f}" height="{h:.1f}" rx="4" '
            f'fill="{_FILL[node.kind]}" stroke="#333"{stroke}/>'
        )
        for i, line in enumerate(_lines(node)):
            weight = ' font-weight="bold"' if i == 0 else ""
            ty = ny + _PAD / 2 + (i + 0.8) * _LINE_H
            parts.append(f'<text x="{nx + _PAD:.1f}" y="{ty:.1f}"{weight}>{escape(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def save(g: Graph, path: str | os.PathLike) -> None:
    """Write `g` to `path` atomically: SVG for `.svg`, the text tree for `.txt`."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in (".svg", ".txt"):
        raise ValueError(f"save: path must end in .svg or .txt, got {os.fspath(path)!r}")
    save_text(path, to_svg(g) if ext == ".svg" else text_tree(g) + "\n")
