"""A layered drawing of a graph (Sugiyama, Tagawa and Toda, 1981), small enough to read.

1. Cycles (between collapsed modules) are broken by turning back edges around.
2. Layers: every node one layer below its latest input (longest path), every source one
   layer above its first reader, so a parameter sits beside the op that reads it.
3. An edge that spans several layers gets a dummy node in each layer between, so that it is
   routed through a slot of its own in every layer it crosses, never behind a box.
4. Order within layers: barycentre sweeps down and up, keeping the order with the fewest
   crossings. The residual stream (`spine`: nodes joined by skip edges, and those edges'
   dummies) is held in the first slot of its layers, so it reads as one straight column.
5. Positions: each layer is placed as close as it can to the mean of its neighbours in the
   layer before (a weighted isotonic regression: pool adjacent violators), down then up.

An edge is drawn as a polyline of anchor points: straight through a layer's band (which holds
the boxes; boxes sit at its top) and a curve with vertical ends across the gap between two
bands, which holds no box. So no part of an edge can pass through a box it does not join.
Coordinates: `minor` along a layer, `major` across layers; top-to-bottom (TB) maps them to
(x, y), left-to-right (LR) to (y, x).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

__all__ = ["Layout", "layered"]

_GAP = 36.0  # between two layers' bands: room for the curves
_SEP, _DUMMY_SEP, _DUMMY_W = 18.0, 10.0, 6.0  # between boxes, beside a dummy; a dummy's slot
_MARGIN = 10.0


@dataclass
class Layout:
    """Where everything goes: boxes as (x, y, w, h) (top-left corner), and per edge (in the
    order given) its anchor points from source to target; the edge is straight between two
    points in one band and curved between two points across a gap (`curved[i]` for the
    segment from point i to i + 1)."""

    width: float
    height: float
    boxes: dict[Hashable, tuple[float, float, float, float]]
    points: list[list[tuple[float, float]]] = field(default_factory=list)
    curved: list[list[bool]] = field(default_factory=list)


def _break_cycles(nodes: list, edges: list[tuple]) -> set[int]:
    """Indices of edges to turn around so that the rest is acyclic (DFS back edges)."""
    out: dict = {n: [] for n in nodes}
    for i, (a, b) in enumerate(edges):
        out[a].append((b, i))
    state, back = {}, set()
    for start in nodes:
        if start in state:
            continue
        state[start] = 1
        stack = [(start, iter(out[start]))]
        while stack:
            node, it = stack[-1]
            for b, i in it:
                if state.get(b) == 1:
                    back.add(i)
                elif b not in state:
                    state[b] = 1
                    stack.append((b, iter(out[b])))
                    break
            else:
                state[node] = 2
                stack.pop()
    return back


def _layers(nodes: list, dag: list[tuple]) -> dict:
    preds: dict = {n: [] for n in nodes}
    succs: dict = {n: [] for n in nodes}
    for a, b in dag:
        if a != b:
            preds[b].append(a)
            succs[a].append(b)
    layer, pending = {}, {n: len(preds[n]) for n in nodes}
    ready = [n for n in reversed(nodes) if pending[n] == 0]
    while ready:
        n = ready.pop()
        layer[n] = 1 + max((layer[a] for a in preds[n]), default=-1)
        for b in succs[n]:
            pending[b] -= 1
            if pending[b] == 0:
                ready.append(b)
    for n in nodes:  # sources beside their first reader
        if not preds[n] and succs[n]:
            layer[n] = max(0, min(layer[b] for b in succs[n]) - 1)
    return layer


def _crossings(upper: list, lower: list, links: list[tuple], nudge: dict) -> int:
    """Crossings between two layers, a node's input links ordered as its ports are."""
    up = {k: i for i, k in enumerate(upper)}
    low = {k: i for i, k in enumerate(lower)}
    pairs = sorted((up[a], low[b] + nudge[(a, b)]) for a, b in links if a in up and b in low)
    return sum(1 for i, (a, b) in enumerate(pairs) for c, d in pairs[i + 1 :] if c > a and d < b)


def _order(rows: list[list], links: list[tuple], pinned: set) -> list[list]:
    """Barycentre sweeps over the layers; the order with the fewest crossings."""
    up: dict = {}
    down: dict = {}
    for a, b in links:
        down.setdefault(a, []).append(b)
        up.setdefault(b, []).append(a)
    # a node's inputs in argument order: the k-th of n input links counts a little right of
    # its reader (a weight left of its bias, as the ports along the reader's top)
    nudge = {}
    for b, sources in up.items():
        for k, a in enumerate(sources):
            nudge[(a, b)] = 0.25 * k / len(sources)

    def count(rs: list[list]) -> int:
        return sum(_crossings(rs[i], rs[i + 1], links, nudge) for i in range(len(rs) - 1))

    best, best_count = [list(r) for r in rows], count(rows)
    for sweep in range(8):
        indices = range(1, len(rows)) if sweep % 2 == 0 else range(len(rows) - 2, -1, -1)
        for i in indices:
            near = rows[i - 1] if sweep % 2 == 0 else rows[i + 1]
            where = {k: j for j, k in enumerate(near)}
            links_of = up if sweep % 2 == 0 else down
            current = {k: j for j, k in enumerate(rows[i])}

            def key(k: Hashable, where: dict = where, links_of: dict = links_of,
                    current: dict = current) -> tuple:  # fmt: skip
                if k in pinned:
                    return (-1.0, 0)
                seen = [
                    where[n] + nudge.get((k, n), 0.0) for n in links_of.get(k, ()) if n in where
                ]
                return (sum(seen) / len(seen) if seen else current[k], current[k])

            rows[i].sort(key=key)
        total = count(rows)
        if total < best_count:
            best, best_count = [list(r) for r in rows], total
    return best


def _pav(targets: list[float], weights: list[float], gaps: list[float]) -> list[float]:
    """Positions closest to `targets` (weighted least squares) with x[i+1] - x[i] >= gaps[i]:
    shift out the gaps, fit a non-decreasing sequence (pool adjacent violators), shift back."""
    offsets = [0.0]
    for g in gaps:
        offsets.append(offsets[-1] + g)
    blocks: list[list[float]] = []  # [mean, weight, count]
    for t, w, o in zip(targets, weights, offsets):
        blocks.append([t - o, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    out = []
    for mean, _, n in blocks:
        out.extend([mean] * n)
    return [y + o for y, o in zip(out, offsets)]


def layered(
    nodes: list[Hashable],
    edges: list[tuple[Hashable, Hashable]],
    sizes: dict[Hashable, tuple[float, float]],
    spine: set[tuple[Hashable, Hashable]] = frozenset(),
    direction: str = "TB",
) -> Layout:
    """Lay out `nodes` (boxes of `sizes[n] = (width, height)`) and `edges`; the edges in
    `spine` (the residual stream's skip edges) and their ends are held in one column."""
    if direction not in ("TB", "LR"):
        raise ValueError(f"direction must be 'TB' (top to bottom) or 'LR', got {direction!r}")
    tb = direction == "TB"
    minor = {n: sizes[n][0] if tb else sizes[n][1] for n in nodes}
    major = {n: sizes[n][1] if tb else sizes[n][0] for n in nodes}
    back = _break_cycles(nodes, edges)
    dag = [(b, a) if i in back else (a, b) for i, (a, b) in enumerate(edges)]
    layer = _layers(nodes, dag)
    n_layers = max(layer.values(), default=0) + 1
    rows: list[list] = [[] for _ in range(n_layers)]
    for n in reversed(nodes):
        rows[layer[n]].append(n)
    pinned = {n for e in spine for n in e}
    chains, links = [], []  # per edge: its nodes layer by layer (dummies between)
    for i, (a, b) in enumerate(dag):
        chain = [a]
        for depth in range(layer[a] + 1, layer[b]):
            dummy = ("dummy", i, depth)
            rows[depth].append(dummy)
            minor[dummy], major[dummy], layer[dummy] = _DUMMY_W, 0.0, depth
            if edges[i] in spine:
                pinned.add(dummy)
            chain.append(dummy)
        chain.append(b)
        chains.append(chain)
        links.extend(zip(chain, chain[1:]))
    rows = _order(rows, links, pinned)
    pos = _positions(rows, links, minor, pinned)
    # bands: boxes at the top of their layer's band
    top, band = [], []
    at = _MARGIN
    for row in rows:
        top.append(at)
        band.append(max((major[n] for n in row), default=0.0))
        at += band[-1] + _GAP
    low = min(pos[n] - minor[n] / 2 for n in pos)
    shift = _MARGIN - low
    boxes = {}
    for n in nodes:
        c, t = pos[n] + shift, top[layer[n]]
        box = (c - minor[n] / 2, t, minor[n], major[n])
        boxes[n] = box if tb else (box[1], box[0], box[3], box[2])
    ports = _ports(chains, pos, minor)
    points, curved = [], []
    for i, chain in enumerate(chains):
        pts, bends = [], []  # bends[k]: the segment from pts[k] to pts[k + 1] crosses a gap
        for j, n in enumerate(chain):
            t = top[layer[n]]
            if j > 0:  # arrived across the gap, at the band's top (a box's top)
                pts.append((ports[(i, j, "in")] + shift, t))
                bends.append(True)
            if j < len(chain) - 1:  # straight down to the band's bottom
                x = ports[(i, j, "out")] + shift
                if j == 0:
                    pts.append((x, t + major[n]))  # from the box's bottom
                pts.append((x, t + band[layer[n]]))
                bends.append(False)
        if i in back:
            pts.reverse()
            bends.reverse()
        points.append(pts if tb else [(y, x) for x, y in pts])
        curved.append(bends)
    width = max((pos[n] + minor[n] / 2 for n in pos), default=0.0) + shift + _MARGIN
    height = at - _GAP + _MARGIN
    return Layout(width if tb else height, height if tb else width, boxes, points, curved)


def _positions(rows: list[list], links: list[tuple], minor: dict, pinned: set) -> dict:
    """Minor coordinate (centre) of every node and dummy."""
    pos: dict = {}
    for row in rows:  # packed, as a start
        at = 0.0
        for n in row:
            pos[n] = at + minor[n] / 2
            at += minor[n] + _SEP
    up: dict = {}
    down: dict = {}
    for a, b in links:
        down.setdefault(a, []).append(b)
        up.setdefault(b, []).append(a)
    for sweep in range(6):
        order = range(len(rows)) if sweep % 2 == 0 else range(len(rows) - 1, -1, -1)
        for i in order:
            row = rows[i]
            if not row:
                continue
            near = up if sweep % 2 == 0 else down
            targets, weights = [], []
            for n in row:
                seen = [pos[m] for m in near.get(n, ())]
                targets.append(0.0 if n in pinned else sum(seen) / len(seen) if seen else pos[n])
                weights.append(1e6 if n in pinned else 4.0 if _is_dummy(n) else 1.0)
            gaps = [
                (minor[a] + minor[b]) / 2 + (_DUMMY_SEP if _is_dummy(a) or _is_dummy(b) else _SEP)
                for a, b in zip(row, row[1:])
            ]
            for n, x in zip(row, _pav(targets, weights, gaps)):
                pos[n] = x
    return pos


def _is_dummy(n: Hashable) -> bool:
    return isinstance(n, tuple) and len(n) == 3 and n[0] == "dummy"


def _ports(chains: list[list], pos: dict, minor: dict) -> dict:
    """Where each edge leaves and enters each node of its chain, along the layer: a box's
    inputs spread over its top in argument order, its outputs over its bottom in the order
    of where they go (fewer crossings); a dummy's, its centre."""
    ports: dict = {}
    ins: dict = {}
    outs: dict = {}
    for i, chain in enumerate(chains):
        for j, n in enumerate(chain):
            ports[(i, j, "in")] = ports[(i, j, "out")] = pos[n]
        ins.setdefault(chain[-1], []).append(i)
        outs.setdefault(chain[0], []).append((pos[chain[1]], i))
    for n, edge_ids in ins.items():
        k = len(edge_ids)
        for rank, i in enumerate(edge_ids):
            ports[(i, len(chains[i]) - 1, "in")] = _spread(pos[n], minor[n], rank, k)
    for n, targets in outs.items():
        targets.sort()
        for rank, (_, i) in enumerate(targets):
            ports[(i, 0, "out")] = _spread(pos[n], minor[n], rank, len(targets))
    return ports


def _spread(centre: float, width: float, rank: int, count: int) -> float:
    usable = min(width - 12.0, 24.0 * (count - 1))  # close together, inside the box
    return centre if count == 1 else centre - usable / 2 + usable * rank / (count - 1)
