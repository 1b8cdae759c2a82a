"""tinyformer.viz: the graph of a result, the backward stepped, what each node saves."""

from __future__ import annotations

import sys
import types
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import viz
from tinyformer.engine import _toposort
from tinyformer.models.gpt import GPT, GPTConfig

SVG = "{http://www.w3.org/2000/svg}"


def _abc():
    a, b, c = (tf.tensor(v, requires_grad=True) for v in (2.0, -3.0, 10.0))
    return a, b, c, (a * b + c) ** 2


def _gpt(seed: int = 0):
    tf.manual_seed(seed)
    config = GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=16)
    idx = np.random.default_rng(seed).integers(0, 11, (2, 6))
    return GPT(config), idx


def test_graph_of_a_known_expression_has_its_nodes_and_edges():
    a, b, c, loss = _abc()
    g = viz.graph(loss, params={"a": a, "b": b, "c": c})
    assert [n.name for n in g.ops] == ["PowBackward", "AddBackward", "MulBackward"]
    assert sorted(n.name for n in g.leaves) == ["a", "b", "c"]
    edges = [(g[x].name, g[y].name) for x, y in g.edges]  # in the order backward visits them
    assert edges == [
        ("AddBackward", "PowBackward"),
        ("MulBackward", "AddBackward"),
        ("c", "AddBackward"),
        ("a", "MulBackward"),
        ("b", "MulBackward"),
    ]
    assert g[g.root].name == "PowBackward" and g[g.root].shapes == [((), "float32")]
    unnamed = viz.graph(loss)
    assert sorted(n.name for n in unnamed.leaves) == ["input 0", "input 1", "input 2"]


def test_text_tree_shows_every_node_once():
    a, b, c, loss = _abc()
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    fan = (x * x + x).sum()  # x is read three times, by two ops
    text = str(viz.graph(fan, params={"x": x}))
    assert text.splitlines()[0].startswith("SumBackward")
    assert text.count("x (see above)") == 2 and text.count("── x  (2,)") == 1
    assert "a  () float32" in str(viz.graph(loss, params={"a": a, "b": b, "c": c}))


def test_stepping_the_whole_backward_gives_the_grads_of_backward():
    model, idx = _gpt()
    _, loss = model(idx, idx)
    loss.backward()
    expected = {n: p.grad.copy() for n, p in model.named_parameters()}
    model.zero_grad()
    _, loss = model(idx, idx)
    stepper = viz.BackwardStepper(loss, params=model)
    steps = list(stepper)
    assert len(steps) == len(stepper.graph.ops)  # every node reached, once
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad, expected[name], err_msg=name)
    last = steps[-1].leaf_grads  # the running .grad after the last step is the final one
    np.testing.assert_array_equal(last["wte.weight"], expected["wte.weight"])
    assert list(stepper) == steps  # stepping again replays the recorded steps


def test_a_step_shows_the_gradients_in_and_out():
    a, b, c, loss = _abc()
    steps = viz.BackwardStepper(loss, params={"a": a, "b": b, "c": c}).run()
    mul = steps[-1]
    assert mul.node.name == "MulBackward"
    assert float(mul.grad_outputs[0]) == 2 * (2.0 * -3.0 + 10.0)  # dL/d(ab) = 2e
    assert [(n, float(g)) for n, g in mul.grad_inputs] == [("a", -24.0), ("b", 16.0)]
    assert steps[0].leaf_grads == {"c": None, "a": None, "b": None}
    assert float(steps[1].leaf_grads["c"]) == 8.0
    assert "step 3/3: MulBackward" in str(mul) and "sends    a: [-24.]" in str(mul)


def test_saved_bytes_are_those_of_the_arrays_the_functions_saved():
    model, idx = _gpt()
    _, loss = model(idx, idx)
    g = viz.graph(loss, params=model)
    for ctx in _toposort([loss.grad_fn]):
        kept = [*ctx.saved_tensors, *vars(ctx).values()]  # NumPy scalars are arrays too
        arrays = {id(a): a for a in kept if isinstance(a, (np.ndarray, np.generic))}
        assert g[id(ctx)].saved_bytes == sum(a.nbytes for a in arrays.values()), ctx.name
    table = viz.memory(g)
    weights = {n for n, _ in model.named_parameters()}
    linear = next(n for n in g.ops if n.name == "LinearBackward")  # the LM head, first visited
    assert [s.leaf for s in linear.saved] == ["", "wte.weight"]  # x, and the tied weight
    assert table.parameters == sum(p.data.nbytes for p in model.parameters())
    assert table.activations < sum(n.saved_bytes for n in g.ops)  # weights listed apart
    assert weights and sum(r[3] for r in table.by_module(1).rows) >= table.activations


def test_memory_counts_an_array_saved_twice_once_and_no_input_as_a_parameter():
    a = tf.randn(3, 4, requires_grad=True)
    h = a.exp()  # exp saves its output h; both muls save h again
    table = viz.memory((h * h).sum() + (h * a).sum())
    savers = [n.name for n in table.graph.ops if any(s.key == id(h.data) for s in n.saved)]
    assert sorted(savers) == ["ExpBackward", "MulBackward", "MulBackward"]
    assert table.activations == h.data.nbytes  # one array in memory, whoever keeps it
    # an input that needs its gradient is a leaf of the graph, not a parameter
    lin = tf.nn.Linear(4, 2)
    x = tf.randn(5, 4, requires_grad=True)
    table = viz.memory(lin(x).sum(), params=lin)
    assert table.parameters == lin.weight.data.nbytes + lin.bias.data.nbytes
    assert any(n.name == "input 0" for n in table.graph.leaves)


def test_attention_saves_one_number_per_row_not_the_weights():
    b, nh, t, hs = 1, 2, 16, 4
    q, k, v = (tf.randn(b, nh, t, hs, requires_grad=True) for _ in range(3))
    fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (node,) = [n for n in viz.graph(fused.sum()).ops if n.name.startswith("ScaledDot")]
    shapes = [s.shape for s in node.saved]
    assert (b, nh, t) in shapes and (b, nh, t, t) not in shapes  # the log-sum-exp per row
    composed = F.softmax(q @ k.transpose(-2, -1) * hs**-0.5, axis=-1) @ v
    saved = [s.shape for n in viz.graph(composed.sum()).ops for s in n.saved]
    assert (b, nh, t, t) in saved  # softmax keeps its output, the matmul its input: T x T


def test_trace_names_the_module_of_every_node_and_leaves_no_trace():
    model, idx = _gpt()
    with viz.trace(model) as tr:
        _, loss = model(idx, idx)
    assert all("forward" not in m.__dict__ for _, m in model.named_modules())
    g = viz.graph(loss, trace=tr)
    modules = {n.name: n.module for n in g.ops if n.module.startswith("h.0.attn")}
    assert modules["ScaledDotProductAttentionBackward"] == "h.0.attn"
    assert modules["LinearBackward"] in ("h.0.attn.c_attn", "h.0.attn.c_proj")
    assert {n.module for n in g.ops if n.name == "LayerNormBackward"} >= {"h.0.ln_1", "ln_f"}
    assert "blocks" not in str(g) and "h.1.mlp.c_fc.weight" in {n.name for n in g.leaves}
    collapsed = g.collapse(depth=1)
    boxes = {n.name: n for n in collapsed.nodes if n.kind == "module"}
    assert {"h.0", "h.1", "wte", "wpe", "ln_f", "lm_head"} <= set(boxes)
    assert boxes["h.0"].ops == sum(1 for n in g.ops if n.module.startswith("h.0"))
    names = [(collapsed[a].name, collapsed[b].name) for a, b in collapsed.edges]
    assert ("h.0", "h.1") in names and ("h.1", "ln_f") in names
    expanded = g.collapse(depth=1, expand=["h.1"])
    assert "h.1" not in {n.name for n in expanded.nodes if n.kind == "module"}
    assert any(n.module == "h.1.attn" for n in expanded.ops)


def test_trace_unwraps_the_model_when_forward_raises():
    model, idx = _gpt()
    with pytest.raises(ValueError, match="longer than the block size"):
        with viz.trace(model):
            model(np.zeros((1, 9), dtype=np.int64))
    assert all("forward" not in m.__dict__ for _, m in model.named_modules())


def test_svg_is_well_formed_xml_with_one_box_per_node(tmp_path):
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    g = viz.graph((x * x).sum(), params={"x<&>'\"": x})
    root = ET.fromstring(g._repr_svg_())
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f".//{SVG}rect")) == len(g.nodes)
    assert len(root.findall(f"./{SVG}path")) == len(g.edges)  # the arrow head is in defs
    assert any(t.text == "x<&>'\"" for t in root.iter(f"{SVG}text"))
    model, idx = _gpt()
    with viz.trace(model) as tr:
        _, loss = model(idx, idx)
    for i, graph in enumerate((viz.graph(loss, trace=tr), viz.graph(loss).collapse())):
        graph.save(tmp_path / f"g{i}.svg")
        ET.parse(tmp_path / f"g{i}.svg")
    g.save(tmp_path / "g.txt")
    assert (tmp_path / "g.txt").read_text() == str(g) + "\n"
    with pytest.raises(ValueError, match=r"must end in \.svg or \.txt"):
        g.save(tmp_path / "g.png")


def test_without_ipywidgets_the_widget_is_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import fails as if not installed
    a, b, c, loss = _abc()
    view = viz.BackwardStepper(loss, params={"a": a, "b": b, "c": c}).widget()
    text = repr(view)
    assert "install ipywidgets" in text and text.count("\nstep ") == 3


def test_with_ipywidgets_the_widget_is_a_slider_over_the_steps(monkeypatch, capsys):
    fake = types.ModuleType("ipywidgets")  # the three widgets it uses, as ipywidgets 8 has them

    class Output:
        def clear_output(self, wait=False):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    class IntSlider:
        def __init__(self, value, min, max, description):
            self.value, self.min, self.max, self.seen = value, min, max, []

        def observe(self, handler, names):
            self.seen.append(handler)

    fake.Output, fake.IntSlider = Output, IntSlider
    fake.VBox = lambda children: children
    monkeypatch.setitem(sys.modules, "ipywidgets", fake)
    a, b, c, loss = _abc()
    slider, _ = viz.BackwardStepper(loss, params={"a": a, "b": b, "c": c}).widget()
    assert (slider.min, slider.max) == (0, 2) and "step 1/3" in capsys.readouterr().out
    slider.value = 2
    slider.seen[0]({"new": 2})
    assert "step 3/3: MulBackward" in capsys.readouterr().out


def test_bad_input_says_what_is_wrong():
    leaf = tf.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="root has no grad_fn"):
        viz.graph(leaf)
    with pytest.raises(TypeError, match="root must be a Tensor"):
        viz.graph(np.ones(2))
    with pytest.raises(TypeError, match="'w' is a ndarray"):
        viz.graph((leaf * 2).sum(), params={"w": np.ones(1)})
    with pytest.raises(TypeError, match="model must be a tinyformer Module"):
        viz.trace(object())
    with pytest.raises(ValueError, match="depth must be >= 1"):
        viz.graph((leaf * 2).sum()).collapse(0)
