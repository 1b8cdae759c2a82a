"""What tensor and module hooks see, against PyTorch's: the same model and input in both, the
gradients each hook is handed compared (float64)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn

from .test_torch_layers import _load

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _pair():
    torch.manual_seed(0)  # the same weights every run
    theirs = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 4), torch.nn.Tanh()
    ).double()
    ours = _load(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Tanh()), theirs)
    return ours, theirs


def _record(model, log):
    def hook(name):
        def record(module, grad_input, grad_output):
            log.append((name, [None if g is None else _np(g) for g in grad_input],
                        [_np(g) for g in grad_output]))  # fmt: skip

        return record

    for i in (0, 2):
        model[i].register_full_backward_hook(hook(i))
    model[2].register_full_backward_pre_hook(lambda m, gout: (gout[0] * 3,))


def _np(g):
    return g.detach().numpy() if hasattr(g, "detach") and not isinstance(g, tf.Tensor) else g.data


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("input_needs_grad", [True, False])
def test_module_backward_hooks_see_what_pytorchs_see(input_needs_grad):
    ours, theirs = _pair()
    x = np.random.default_rng(0).standard_normal((5, 3))
    logs = [], []
    _record(ours, logs[0]), _record(theirs, logs[1])
    xo = tf.tensor(x, requires_grad=input_needs_grad)
    xt = torch.tensor(x, requires_grad=input_needs_grad)
    (ours(xo) ** 2).sum().backward()
    (theirs(xt) ** 2).sum().backward()
    assert [entry[0] for entry in logs[0]] == [entry[0] for entry in logs[1]] == [2, 0]
    for (_, gin_o, gout_o), (_, gin_t, gout_t) in zip(*logs):
        for a, b in zip(gout_o, gout_t, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
        assert [g is None for g in gin_o] == [g is None for g in gin_t]
        for a, b in zip(gin_o, gin_t, strict=True):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        np.testing.assert_allclose(p.grad, q.grad.numpy(), rtol=1e-12, atol=1e-14, err_msg=name)
    if input_needs_grad:
        np.testing.assert_allclose(xo.grad, xt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_tensor_hooks_match_pytorchs():
    x = np.random.default_rng(1).standard_normal(4)
    results = []
    for lib in (tf, torch):
        t = lib.tensor(x, requires_grad=True)
        t.register_hook(lambda g: g.clamp(-0.5, 0.5))
        y = t * 2.0
        y.register_hook(lambda g: g * g)
        (y.sin() * t).sum().backward()
        results.append(t.grad if lib is tf else t.grad.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-12, atol=1e-14)
