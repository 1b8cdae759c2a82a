"""Drawings a student can trust: the graph's edges never pass behind a box they do not join,
and each ends on its own boxes; a transformer block is drawn top to bottom, narrow enough for a
notebook; the residual stream is one column of skip edges; the bytes a box says it saves are
the memory table's; attention heat maps have a colour bar."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import viz
from tinyformer.models.gpt import CONFIGS, GPT, GPTConfig
from tinyformer.viz.svg import format_bytes

SVG = "{http://www.w3.org/2000/svg}"


def _gpt_graph(n_layer: int = 1, config: GPTConfig | None = None):
    tf.manual_seed(0)
    config = config or GPTConfig(block_size=8, vocab_size=11, n_layer=n_layer, n_head=2, n_embd=16)
    model = GPT(config)
    idx = np.random.default_rng(0).integers(0, config.vocab_size, (2, 6))
    with viz.trace(model) as tr:
        _, loss = model(idx, idx)
    return viz.graph(loss, trace=tr), loss, tr


def _drawing(svg: str) -> tuple[dict, list, ET.Element]:
    """(boxes {key: (x0, y0, x1, y1)}, edges [(from, to, points, residual)], the root)."""
    root = ET.fromstring(svg)
    boxes = {}
    for g in root.findall(f"./{SVG}g"):
        r = g.find(f"{SVG}rect")
        x, y, w, h = (float(r.get(k)) for k in ("x", "y", "width", "height"))
        boxes[g.get("data-key")] = (x, y, x + w, y + h)
    edges = []
    for path in root.findall(f"./{SVG}path"):
        edges.append((path.get("data-from"), path.get("data-to"), _flatten(path.get("d")),
                      path.get("data-residual") == "1"))  # fmt: skip
    return boxes, edges, root


def _flatten(d: str) -> list[tuple[float, float]]:
    """The points of a path of M, L and C commands, each cubic sampled finely."""
    tokens = re.findall(r"[MLC]|-?\d+(?:\.\d+)?", d)
    points, i, current = [], 0, None
    while i < len(tokens):
        command = tokens[i]
        if command in "ML":
            current = (float(tokens[i + 1]), float(tokens[i + 2]))
            points.append(current)
            i += 3
        else:
            assert command == "C", d
            p = [current] + [(float(tokens[i + 1 + 2 * k]), float(tokens[i + 2 + 2 * k]))
                             for k in range(3)]  # fmt: skip
            for t in np.linspace(0, 1, 33)[1:]:
                u = 1 - t
                weights = (u**3, 3 * u * u * t, 3 * u * t * t, t**3)
                points.append(tuple(sum(w * q[j] for w, q in zip(weights, p)) for j in range(2)))
            current = p[3]
            i += 7
    return points


def _hits(a, b, box, inset: float = 0.5) -> bool:
    """Whether the segment a-b enters the box's interior (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box[0] + inset, box[1] + inset, box[2] - inset, box[3] - inset
    dx, dy = b[0] - a[0], b[1] - a[1]
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, a[0] - x0), (dx, x1 - a[0]), (-dy, a[1] - y0), (dy, y1 - a[1])):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                lo = max(lo, t)
            else:
                hi = min(hi, t)
    return lo < hi


def _check_routing(svg: str, direction: str = "TB") -> None:
    boxes, edges, _ = _drawing(svg)
    for source, target, points, _ in edges:
        for key, box in boxes.items():
            if key in (source, target):
                continue
            for a, b in zip(points, points[1:]):
                assert not _hits(a, b, box), f"edge {source}->{target} passes through box {key}"
        # each end on its own box's side: out of the bottom (TB) or right (LR), into the top
        # or left of the target (or the other way round for an edge turned back)
        (sx, sy), (tx, ty) = points[0], points[-1]
        src, dst = boxes[source], boxes[target]
        if direction == "TB":
            forward = abs(sy - src[3]) < 0.2 and abs(ty - dst[1]) < 0.2
            backward = abs(sy - src[1]) < 0.2 and abs(ty - dst[3]) < 0.2
            across = src[0] - 0.2 <= sx <= src[2] + 0.2 and dst[0] - 0.2 <= tx <= dst[2] + 0.2
        else:
            forward = abs(sx - src[2]) < 0.2 and abs(tx - dst[0]) < 0.2
            backward = abs(sx - src[0]) < 0.2 and abs(tx - dst[2]) < 0.2
            across = src[1] - 0.2 <= sy <= src[3] + 0.2 and dst[1] - 0.2 <= ty <= dst[3] + 0.2
        assert (forward or backward) and across, f"edge {source}->{target} misses its boxes"
    # and the boxes themselves never overlap
    keys = list(boxes)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes[a], boxes[b]
            assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 or by1 <= ay0, (a, b)


@pytest.mark.parametrize("direction", ["TB", "LR"])
def test_no_edge_passes_through_a_box_it_does_not_join(direction):
    # long edges were one curve from source to target under the boxes: in a GPT block the
    # skip edges seemed to enter the wrong nodes, the tied embedding to feed the final norm
    g, _, _ = _gpt_graph(2)
    _check_routing(g.to_svg(direction), direction)
    _check_routing(g.collapse(1).to_svg(direction), direction)
    _check_routing(g.collapse(2, expand=["h.1"]).to_svg(direction), direction)
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    _check_routing(viz.graph(((x * x + x) * x).sum(), params={"x": x}).to_svg(direction), direction)


def test_a_cycle_between_collapsed_modules_is_still_routed_around_boxes():
    # module "a" reads module "b"'s output, which read "a"'s: boxes a <-> b form a cycle
    from tinyformer.viz.graph import Graph, Node

    nodes = [Node(k, "module", name, [((2,), "float32")], name) for k, name in
             [(1, "out"), (2, "a"), (3, "b"), (4, "c"), (5, "in")]]  # fmt: skip
    edges = [(5, 2), (2, 3), (3, 2), (2, 4), (3, 4), (4, 1), (5, 4)]
    _check_routing(Graph(nodes, edges, 1).to_svg())


def test_the_tied_embedding_edge_ends_at_the_head_not_the_final_norm():
    g, _, _ = _gpt_graph(1)
    boxes, edges, _ = _drawing(g.to_svg())
    wte = next(n.key for n in g.leaves if n.name == "wte.weight")
    head = next(n.key for n in g.ops if n.module == "lm_head")
    ln_f = next(n.key for n in g.ops if n.module == "ln_f")
    ends = {target for source, target, *_ in edges if source == str(wte)}
    assert str(head) in ends and str(ln_f) not in ends


@pytest.mark.parametrize("config", ["block", "baby"])
def test_a_gpt_drawing_is_top_to_bottom_and_fits_a_notebook(config):
    # data flowed in one row: a block was 3,700-5,000 px wide and the baby GPT 15,800 px
    baby = GPTConfig(**{**CONFIGS["baby"].__dict__, "vocab_size": 65, "block_size": 8})
    g, _, _ = _gpt_graph(1) if config == "block" else _gpt_graph(config=baby)
    root = ET.fromstring(g.to_svg())
    width, height = float(root.get("width")), float(root.get("height"))
    assert width <= 1200 and height > 2 * width, (width, height)
    wide = ET.fromstring(g.to_svg("LR"))
    assert float(wide.get("width")) > 2 * float(wide.get("height"))
    with pytest.raises(ValueError, match="direction must be 'TB' .* or 'LR', got 'BT'"):
        g.to_svg("BT")


def test_the_residual_stream_is_one_column_of_skip_edges():
    n_layer = 3
    g, _, _ = _gpt_graph(n_layer)
    boxes, edges, _ = _drawing(g.to_svg())
    skips = [(s, t) for s, t, _, residual in edges if residual]
    assert len(skips) == 2 * n_layer  # around attention and around the MLP, in every block
    adds = {k for e in skips for k in e}
    assert {g[int(k)].name for k in adds} == {"AddBackward"}  # the embeddings' sum, the residuals
    centres = [(boxes[k][0] + boxes[k][2]) / 2 for k in adds]
    assert max(centres) - min(centres) < 1  # one straight column
    for source, target in skips:  # each skip edge joins x to x + f(x), over the branch
        assert boxes[target][1] - boxes[source][3] > 100


def test_each_box_says_the_bytes_the_memory_table_counts():
    # the drawing said lm_head saved 1.4 KiB (the tied weight's bytes too), the table 768 B
    g, loss, tr = _gpt_graph(1)
    table = viz.memory(g)
    _, _, root = _drawing(g.to_svg())
    drawn = {gr.get("data-key"): gr for gr in root.findall(f"./{SVG}g")}
    for node, row in zip(g.ops, table.rows, strict=True):
        box = drawn[str(node.key)]
        assert int(box.get("data-saved-bytes")) == row[3]
        texts = [t.text for t in box.findall(f"{SVG}text") if t.text.startswith("saves ")]
        assert len(texts) == (1 if row[3] or "=" in row[2] else 0)
        if row[3]:
            assert texts[0].startswith(f"saves {format_bytes(row[3])}")
    head = next(n for n in g.ops if n.module == "lm_head")
    assert [t.text for t in drawn[str(head.key)].findall(f"{SVG}text")][-1] == (
        "saves 768 B + wte.weight"
    )
    modules = g.collapse(1)
    per_module = {name: n for name, _, _, n in table.by_module(1).rows}
    _, _, root = _drawing(modules.to_svg())
    for box in root.findall(f"./{SVG}g"):
        node = modules[int(box.get("data-key"))]
        if node.kind == "module":
            assert int(box.get("data-saved-bytes")) == per_module[node.name]


def test_attention_heat_maps_have_a_colour_bar(tmp_path):
    from tinyformer.data.scenes import VOCAB, make_scenes
    from tinyformer.models.vilbert import ViLBERT, ViLBERTConfig
    from tinyformer.train.seq2seq.plots import plot_alignment_grid
    from tinyformer.train.vilbert.report import plot_coattention

    tf.manual_seed(0)
    model = ViLBERT(ViLBERTConfig(vocab_size=len(VOCAB), n_text_layer=1, n_co_layer=1, n_head=2,
                                  d_text=8, d_image=8, dropout=0.0))  # fmt: skip
    rng = np.random.default_rng(0)
    images = rng.random((20, 1, 8, 8)).astype(np.float32)
    scenes = make_scenes(images, rng.integers(0, 10, 20), 2, rng)
    fig = plot_coattention(model, scenes, tmp_path / "coattention.png")
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"
    assert (tmp_path / "coattention.png").stat().st_size > 0
    weights = rng.random((2, 3, 4))
    plot_alignment_grid(
        weights, ["abcd", "efgh"], np.zeros((2, 3), np.int64), "t", tmp_path / "a.png"
    )
    assert (tmp_path / "a.png").stat().st_size > 0
