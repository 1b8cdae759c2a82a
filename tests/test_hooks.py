"""Tensor and module hooks, as PyTorch's: when each runs, what it sees, what it may replace,
and that `handle.remove()` undoes it."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn


def test_a_leaf_hook_sees_its_whole_gradient_once_and_may_replace_it():
    x = tf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.data.copy()) or g * 2)
    (x * x).sum().backward()  # two edges reach x: the hook sees their sum, 2x
    assert len(seen) == 1
    np.testing.assert_array_equal(seen[0], [2, 4, 6])
    np.testing.assert_array_equal(x.grad, [4, 8, 12])
    handle.remove()
    handle.remove()  # twice is fine
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [2, 4, 6])


def test_a_non_leaf_hook_changes_what_flows_on():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3.0
    y.register_hook(lambda g: g + 1.0)
    y.retain_grad()
    (y * y).sum().backward()  # dL/dy = 2y = [6, 12] -> [7, 13]; dL/dx = 3 * that
    np.testing.assert_array_equal(y.grad, [7, 13])  # retain_grad sees the hook's gradient
    np.testing.assert_array_equal(x.grad, [21, 39])


def test_hooks_run_in_order_and_grad_runs_them_too():
    x = tf.tensor([1.0], requires_grad=True)
    order = []
    x.register_hook(lambda g: order.append("a") or g * 10)
    x.register_hook(lambda g: order.append("b") or g + 1)
    (g,) = tf.grad((x * 2.0).sum(), [x])
    assert order == ["a", "b"]
    np.testing.assert_array_equal(g.data if hasattr(g, "data") else g, [21])


def test_a_hook_may_not_change_the_shape_and_needs_a_gradient():
    x = tf.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match=r"returned shape \(\) for a gradient of shape \(2,\)"):
        (x * 1.0).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        tf.tensor([1.0]).register_hook(lambda g: g)
    with pytest.raises(TypeError, match="expected a function, got str"):
        x.register_hook("g")


def _mlp():
    tf.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_forward_hooks_see_and_replace_inputs_and_outputs():
    model = _mlp()
    x = tf.randn(5, 3)
    plain = model(x).data.copy()
    calls = []
    pre = model[0].register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 0,))
    post = model[0].register_forward_hook(lambda m, args, out: calls.append("post"))
    out = model(x).data
    assert calls == ["pre", "post"]
    np.testing.assert_allclose(out, model(tf.zeros(5, 3)).data)  # the pre-hook zeroed x
    pre.remove(), post.remove()
    np.testing.assert_array_equal(model(x).data, plain)
    with model[2].register_forward_hook(lambda m, args, out: out * 0):
        np.testing.assert_array_equal(model(x).data, 0)
    np.testing.assert_array_equal(model(x).data, plain)  # the with-block removed it


def test_forward_hooks_with_kwargs_and_prepend():
    layer = nn.Linear(2, 2)
    order = []
    layer.register_forward_hook(lambda m, a, out: order.append(1))
    layer.register_forward_hook(lambda m, a, out: order.append(0), prepend=True)
    seen = {}
    layer.register_forward_pre_hook(
        lambda m, args, kwargs: seen.update(kwargs) or (args, kwargs), with_kwargs=True
    )
    layer(tf.ones(1, 2))
    assert order == [0, 1] and seen == {}
    with pytest.raises(RuntimeError, match=r"must return None or \(args, kwargs\)"):
        bad = nn.Linear(2, 2)
        bad.register_forward_pre_hook(lambda m, a, k: 3, with_kwargs=True)
        bad(tf.ones(1, 2))


def test_a_full_backward_hook_sees_input_and_output_gradients_and_may_replace_them():
    model = _mlp()
    x = tf.randn(5, 3, requires_grad=True)
    got = {}

    def hook(module, grad_input, grad_output):
        got["in"], got["out"] = grad_input[0].data.copy(), grad_output[0].data.copy()

    handle = model[2].register_full_backward_hook(hook)
    h = model[1](model[0](x))
    h.retain_grad()
    out = model[2](h)
    out.retain_grad()
    (out * out).sum().backward()
    np.testing.assert_allclose(got["out"], out.grad)
    np.testing.assert_allclose(got["in"], h.grad)
    handle.remove()
    model[0].register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0,))
    x.grad = None
    model(x).sum().backward()
    np.testing.assert_array_equal(x.grad, 0)
    assert model[0].weight.grad is not None and np.abs(model[0].weight.grad).sum() > 0


def test_backward_hooks_on_a_module_whose_inputs_need_no_gradient():
    layer = nn.Linear(3, 2)
    calls = []
    layer.register_full_backward_pre_hook(lambda m, gout: calls.append("pre"))
    layer.register_full_backward_hook(lambda m, gin, gout: calls.append(gin))
    layer(tf.ones(4, 3)).sum().backward()  # x needs none: grad_input is (None,)
    assert calls == ["pre", (None,)]
    assert layer.weight.grad is not None
    with pytest.raises(NotImplementedError, match="use register_full_backward_hook"):
        layer.register_backward_hook(lambda *a: None)


def test_backward_hooks_keep_a_named_tuple_output_a_named_tuple():
    from collections import namedtuple

    Pair = namedtuple("Pair", "first second")

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(2, 2)

        def forward(self, x):
            y = self.layer(x)
            return Pair(y, y * 2.0)

    model, seen = Two(), []
    model.register_full_backward_hook(lambda m, gin, gout: seen.append(len(gout)))
    out = model(tf.ones(3, 2, requires_grad=True))
    assert type(out) is Pair
    (out.first.sum() + out.second.sum()).backward()
    assert seen == [2]
