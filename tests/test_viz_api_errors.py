"""Bad arguments to tinyformer.viz raise the error PyTorch would (TypeError, ValueError,
IndexError) naming the argument and the value, never an unrelated Python error from deep
inside (`cannot unpack non-iterable int`, `'GPT' object has no attribute 'modules'`, `'<' not
supported`, `list index out of range`)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import viz
from tinyformer.models.gpt import GPT, GPTConfig


def _loss():
    w = tf.tensor([1.0, 2.0], requires_grad=True)
    return w, ((w * 3.0).exp()).sum()


@pytest.mark.parametrize(
    "params, message",
    [
        (5, r"params must be a Module, a \{name: tensor\} dict or \(name, tensor\) pairs, got int"),
        ("w", "params must be a Module, .* got str"),
        ([("w",)], r"an item is a tuple of length 1, not a \(name, tensor\) pair"),
        (["w"], r"an item is a str, not a \(name, tensor\) pair"),
        ([(1, "x")], "params: names must be str, got int 1"),
    ],
)
def test_graph_params_that_are_not_names_and_tensors(params, message):
    _, loss = _loss()
    with pytest.raises(TypeError, match=message):
        viz.graph(loss, params=params)


def test_graph_params_as_a_bare_tensor_or_a_list_of_tensors():
    w, loss = _loss()
    with pytest.raises(TypeError, match="params must be .* got Tensor"):
        viz.graph(loss, params=w)
    with pytest.raises(TypeError, match="an item is a Tensor, not a"):
        viz.graph(loss, params=[w])
    assert [n.name for n in viz.graph(loss, params=[("w", w)]).leaves] == ["w"]


def test_graph_trace_must_be_a_trace():
    tf.manual_seed(0)
    model = GPT(GPTConfig(block_size=4, vocab_size=5, n_layer=1, n_head=1, n_embd=4))
    _, loss = model(np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64))
    with pytest.raises(TypeError, match=r"trace must be what .* gives \(tr\), got GPT"):
        viz.graph(loss, trace=model)  # the model where its trace belongs
    for call in (
        lambda: viz.memory(loss, trace=model),
        lambda: viz.BackwardStepper(loss, trace=model),
    ):
        with pytest.raises(TypeError, match="trace must be"):
            call()


@pytest.mark.parametrize(
    "depth, error, message",
    [
        (0, ValueError, "collapse: depth must be >= 1, got 0"),
        (-2, ValueError, "collapse: depth must be >= 1, got -2"),
        ("1", TypeError, "collapse: depth must be an int >= 1, got str '1'"),
        (1.5, TypeError, "collapse: depth must be an int >= 1, got float 1.5"),
        (True, TypeError, "collapse: depth must be an int >= 1, got bool True"),
        (None, TypeError, "collapse: depth must be an int >= 1, got NoneType None"),
    ],
)
def test_collapse_depth_out_of_range_or_not_an_int(depth, error, message):
    _, loss = _loss()
    with pytest.raises(error, match=message):
        viz.graph(loss).collapse(depth=depth)
    with pytest.raises(error, match=message.replace("collapse", "by_module")):
        viz.memory(loss).by_module(depth=depth)


def test_collapse_expand_takes_one_name_or_names():
    tf.manual_seed(0)
    model = GPT(GPTConfig(block_size=4, vocab_size=5, n_layer=2, n_head=1, n_embd=4))
    with viz.trace(model) as tr:
        _, loss = model(np.zeros((1, 3), np.int64), np.zeros((1, 3), np.int64))
    g = viz.graph(loss, trace=tr)
    # a str was read letter by letter, and expanded nothing
    assert g.collapse(1, expand="h.0").nodes == g.collapse(1, expand=["h.0"]).nodes
    assert any(n.kind == "op" and n.module.startswith("h.0") for n in g.collapse(1, "h.0").nodes)
    with pytest.raises(TypeError, match="expand must hold module names"):
        g.collapse(1, expand=[0])


def test_stepper_index_out_of_range_names_the_step_and_the_count():
    w, loss = _loss()
    stepper = viz.BackwardStepper(loss, params={"w": w})
    assert len(stepper) == 3 and stepper[-1] is stepper[2] and stepper[1:] == stepper.steps[1:]
    assert stepper[np.int64(0)] is stepper[0]
    for index in (3, -4, 100):
        with pytest.raises(IndexError, match=rf"step {index} out of range: .* has 3 steps"):
            stepper[index]
    with pytest.raises(TypeError, match="steps are indexed by int, got str"):
        stepper["0"]


def test_memory_root_must_be_a_tensor_or_a_graph():
    with pytest.raises(TypeError, match="memory: root must be a Tensor or a viz.graph, got list"):
        viz.memory([1.0])
