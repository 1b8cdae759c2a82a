"""Activations, losses and GroupNorm that PyTorch tutorials use (DCGAN, DQN, diffusion U-Nets),
against PyTorch's own modules with `compare` (test_torch_layers.py): same float64 inputs, same
outputs, input gradients and parameter gradients."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.nn import functional as F

from .test_torch_layers import _load, compare

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _x(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("GroupNorm", (2, 4), (3, 4, 5, 5)),
        ("GroupNorm", (1, 3, 1e-3, False), (2, 3, 7)),
        ("GroupNorm", (3, 3), (1, 3, 2, 2)),  # one example: no batch statistics needed
        ("ELU", (0.5,), (4, 5)),
        ("Softplus", (2.0, 3.0), (4, 5)),  # beta x past the threshold in places: linear there
        ("LeakyReLU", (0.2,), (4, 5)),
    ],
)
def test_layer_matches_pytorch(name, args, shape):
    scale = 3.0 if name == "Softplus" else 1.0
    theirs = getattr(torch.nn, name)(*args).double()
    with torch.no_grad():  # weights other than ones and zeros, so that their gradients count
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(_x(*p.shape, seed=2)))
    ours = _load(getattr(nn, name)(*args), theirs)
    compare(ours, theirs, _x(*shape, scale=scale))


@pytest.mark.parametrize(
    "name, kw",
    [
        ("L1Loss", {}),
        ("L1Loss", {"reduction": "none"}),
        ("SmoothL1Loss", {"beta": 0.5}),
        ("SmoothL1Loss", {"beta": 0.0, "reduction": "sum"}),
        ("HuberLoss", {"delta": 2.0}),
        ("BCELoss", {}),
        ("BCELoss", {"reduction": "none"}),
    ],
)
def test_loss_matches_pytorch(name, kw):
    if name == "BCELoss":
        rng = np.random.default_rng(1)
        inputs = (rng.uniform(0.05, 0.95, (4, 3)), rng.uniform(0, 1, (4, 3)))
    else:
        inputs = (_x(4, 3, scale=2.0), _x(4, 3, seed=1))
    compare(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), *inputs, constants=(1,))


def test_cosine_similarity_matches_pytorch():
    a, b = _x(3, 5), _x(1, 5, seed=1)  # b broadcasts over a's rows
    ta, tb = tf.tensor(a, requires_grad=True), tf.tensor(b, requires_grad=True)
    pa, pb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ours, theirs = F.cosine_similarity(ta, tb, dim=1), torch.nn.functional.cosine_similarity(pa, pb)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(ta.grad, pa.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tb.grad, pb.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_errors_name_the_function_and_the_bad_value():
    x = tf.randn(2, 6, 3)
    with pytest.raises(tf.OpError, match="group_norm: 6 channels do not split into 4 groups"):
        F.group_norm(x, 4)
    with pytest.raises(tf.OpError, match=r"group_norm: weight must have shape \(6,\), got \(3,\)"):
        F.group_norm(x, 2, tf.ones(3))
    with pytest.raises(ValueError, match="GroupNorm: 6 channels do not split into 4 groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(tf.OpError, match="smooth_l1_loss: beta must be a number >= 0, got -1"):
        F.smooth_l1_loss(x, x, beta=-1)
    with pytest.raises(tf.OpError, match="l1_loss: reduction must be mean, sum or none"):
        F.l1_loss(x, x, reduction="avg")
    with pytest.raises(tf.OpError, match=r"l1_loss: input \(2, 6, 3\) and target \(6, 3\)"):
        F.l1_loss(x, tf.randn(6, 3))
    with pytest.raises(tf.OpError, match="softplus: beta must be > 0, got 0"):
        F.softplus(x, beta=0)


def test_elu_and_softplus_stay_finite_far_out():
    x = tf.tensor([-1000.0, -30.0, 0.5, 30.0, 1000.0], requires_grad=True)
    (F.elu(x) + F.softplus(x)).sum().backward()
    assert np.isfinite(x.grad).all()
    np.testing.assert_allclose(F.softplus(x).data[[0, 4]], [0.0, 1000.0])


@pytest.mark.parametrize(
    "name, kw",
    [
        ("MaxPool1d", {"kernel_size": 2}),
        ("MaxPool1d", {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2}),
        ("AvgPool1d", {"kernel_size": 3, "stride": 2}),
        ("AvgPool1d", {"kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False}),
    ],
)
def test_pool1d_matches_pytorch(name, kw):
    compare(getattr(nn, name)(**kw), getattr(torch.nn, name)(**kw), _x(2, 3, 9))


def test_pool1d_errors_name_the_function():
    with pytest.raises(
        tf.OpError, match=r"max_pool1d: input must be \(N, C, L\), got shape \(3, 9\)"
    ):
        F.max_pool1d(tf.randn(3, 9), 2)
    with pytest.raises(tf.OpError, match="avg_pool1d: stride must be an int >= 1, got 0"):
        F.avg_pool1d(tf.randn(1, 3, 9), 2, stride=0)
