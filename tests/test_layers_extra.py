"""What needs no PyTorch to check in EmbeddingBag, the instance norms, the padding modes,
cross-entropy against class probabilities, nn.init.orthogonal_, tf.bernoulli and
tf.set_printoptions: their errors, and properties that hold whatever PyTorch does."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.autograd import OpError
from tinyformer.nn import functional as F


def test_embedding_bag_mean_is_the_mean_of_the_bags_rows():
    bag = nn.EmbeddingBag(6, 2, mode="mean", padding_idx=0)
    w = bag.weight.data
    out = bag(np.array([3, 0, 5, 1, 0]), np.array([0, 3, 5])).data
    np.testing.assert_allclose(out[0], (w[3] + w[5]) / 2, rtol=1e-6)  # the padding row counts not
    np.testing.assert_allclose(out[1], w[1], rtol=1e-6)
    np.testing.assert_array_equal(out[2], 0)  # an empty bag


@pytest.mark.parametrize(
    "kwargs, call, message",
    [
        ({"mode": "median"}, None, "mode must be one of"),
        ({"padding_idx": 9}, None, "padding_idx 9 is outside"),
        ({}, (np.array([1, 2]),), r"\(N,\) with offsets \(B,\); got shape \(2,\) without"),
        ({}, (np.array([[1, 2]]), np.array([0])), "offsets must be None for a 2-D input"),
        ({}, (np.array([1, 2]), np.array([1])), "offsets must start at 0"),
        ({}, (np.array([1, 2]), np.array([0, 2, 1])), "not decrease"),
        ({}, (np.array([1.0, 2.0]), np.array([0])), "input must hold integers"),
        ({"mode": "mean"}, (np.array([[1, 2]]), None, np.ones(2)), "needs mode='sum'"),
        ({"mode": "sum"}, (np.array([[1, 2]]), None, np.ones(3)), "per_sample_weights of shape"),
        ({"include_last_offset": True}, (np.array([1, 2]), np.array([0])), "at least 2"),
    ],
)
def test_embedding_bag_refuses_bad_arguments(kwargs, call, message):
    with pytest.raises(ValueError, match=message):
        bag = nn.EmbeddingBag(5, 2, **kwargs)
        bag(*call)


def test_embedding_from_pretrained_keeps_the_table_and_refuses_other_shapes():
    table = np.arange(6.0).reshape(3, 2)
    layer = nn.Embedding.from_pretrained(table, freeze=False, padding_idx=0)
    np.testing.assert_array_equal(layer.weight.data, table)  # the padding row is not zeroed
    assert layer.weight.requires_grad and layer.padding_idx == 0
    layer(np.array([0, 2])).sum().backward()
    np.testing.assert_array_equal(layer.weight.grad, [[0, 0], [0, 0], [1, 1]])
    with pytest.raises(ValueError, match=r"2-D float table \(V, D\), got shape \(3,\)"):
        nn.Embedding.from_pretrained(np.ones(3))


def test_instance_norm_normalises_each_channel_of_each_image():
    x = np.random.default_rng(0).normal(3.0, 2.0, (2, 3, 4, 5))
    y = nn.InstanceNorm2d(3)(tf.tensor(x)).data
    np.testing.assert_allclose(y.mean(axis=(2, 3)), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=(2, 3)), 1, rtol=1e-4)
    with pytest.raises(ValueError, match="track_running_stats=True is not supported"):
        nn.InstanceNorm2d(3, track_running_stats=True)
    with pytest.raises(
        ValueError, match=r"expected 3 channels on axis 1, got shape \(2, 4, 4, 5\)"
    ):
        nn.InstanceNorm2d(3)(tf.zeros(2, 4, 4, 5))
    with pytest.raises(ValueError, match="input must have 3 axes"):
        nn.InstanceNorm1d(3)(tf.zeros(2, 3, 4, 5))


def test_reflect_padding_mirrors_without_the_edge_and_sums_gradients():
    x = tf.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = F.pad(x, (2, 1), mode="reflect")
    np.testing.assert_array_equal(y.data, [3, 2, 1, 2, 3, 2])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1, 3, 2])  # x[1] appears three times
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="replicate").data, [1, 1, 1, 2, 3, 3])
    np.testing.assert_array_equal(F.pad(x, (2, 1), mode="circular").data, [2, 3, 1, 2, 3, 1])


@pytest.mark.parametrize(
    "mode, pad, message",
    [
        ("reflect", (3, 0), r"axis 0 of size 3 by at most 2, got \(3, 0\)"),
        ("circular", (0, 4), "by at most 3"),
        ("wrap", (1, 1), "mode must be 'constant', 'reflect'"),
        ("replicate", (1, 1), "no elements to copy on axis 0 of size 0"),
    ],
)
def test_padding_modes_refuse_widths_they_cannot_fill(mode, pad, message):
    with pytest.raises(OpError, match=message):
        F.pad(tf.ones(0 if "size 0" in message else 3), pad, mode=mode)


def test_padding_layers_refuse_bad_widths():
    with pytest.raises(ValueError, match=r"padding must be a whole number >= 0 or 4 of them"):
        nn.ReflectionPad2d((1, 2))
    with pytest.raises(ValueError, match="or 2 of them, got -1"):
        nn.ZeroPad1d(-1)
    assert nn.ReplicationPad2d(1)(tf.ones(1, 2, 2)).shape == (1, 4, 4)


def test_cross_entropy_with_one_hot_probabilities_equals_the_class_index_form():
    rng = np.random.default_rng(0)
    logits, labels = rng.standard_normal((5, 4)), rng.integers(0, 4, 5)
    soft = F.cross_entropy(tf.tensor(logits), np.eye(4)[labels], label_smoothing=0.1)
    hard = F.cross_entropy(tf.tensor(logits), labels, label_smoothing=0.1)
    np.testing.assert_allclose(soft.item(), hard.item(), rtol=1e-12)
    with pytest.raises(OpError, match="ignore_index does not apply to class probabilities"):
        F.cross_entropy(tf.tensor(logits), np.eye(4)[labels], ignore_index=0)


def test_orthogonal_init_gives_orthonormal_rows_or_columns():
    for shape in [(3, 5), (6, 2, 2), (4, 4)]:
        w = nn.Parameter(np.zeros(shape, np.float64))
        nn.init.orthogonal_(w, gain=2.0)
        m = w.data.reshape(shape[0], -1)
        small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
        np.testing.assert_allclose(small, 4.0 * np.eye(len(small)), atol=1e-12)
    with pytest.raises(ValueError, match="at least 2 axes"):
        nn.init.orthogonal_(tf.zeros(3))


def test_bernoulli_draws_ones_at_the_given_rate():
    tf.manual_seed(0)
    draws = tf.bernoulli(tf.full((20000,), 0.3))
    assert draws.dtype == np.float32 and set(np.unique(draws.data)) <= {0.0, 1.0}
    assert abs(draws.data.mean() - 0.3) < 0.02
    np.testing.assert_array_equal(tf.bernoulli(tf.tensor([0.0, 1.0])).data, [0, 1])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        tf.bernoulli(tf.tensor([1.5]))


def test_set_printoptions_changes_how_tensors_print_not_numpy():
    before = np.get_printoptions()
    try:
        tf.set_printoptions(precision=2)
        assert repr(tf.tensor([1.23456])) == "tensor([1.23])"
        tf.set_printoptions(threshold=5, edgeitems=1)
        assert "..." in repr(tf.arange(10.0))
        with pytest.raises(ValueError, match="profile must be one of"):
            tf.set_printoptions(profile="long")
        assert np.get_printoptions() == before
    finally:
        tf.set_printoptions(profile="default")
    assert repr(tf.tensor([1.23456])) == "tensor([1.2346])"


def test_channel_dropout_zeroes_whole_channels_and_passes_their_gradient():
    tf.manual_seed(1)
    x = tf.tensor(np.random.default_rng(0).standard_normal((8, 5, 3, 3)), requires_grad=True)
    layer = nn.Dropout2d(0.5)
    y = layer(x)
    per_channel = y.data.reshape(8, 5, 9)
    kept = (per_channel != 0).all(axis=2)
    assert ((per_channel == 0).all(axis=2) | kept).all()  # every channel all kept or all zeroed
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(per_channel[kept], 2.0 * x.data.reshape(8, 5, 9)[kept])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.reshape(8, 5, 9), 2.0 * kept[..., None] * np.ones(9))
    layer.eval()
    assert layer(x) is x
    assert nn.Dropout1d(0.5)(tf.ones(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(OpError, match=r"dropout2d: input must be \(N, C, \.\.\.\) with 2"):
        F.dropout2d(tf.ones(3, 4), 0.5)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        nn.Dropout2d(1.5)


def test_activation_arguments_are_checked():
    with pytest.raises(ValueError, match="min_val 1.0 must be below max_val 1.0"):
        nn.Hardtanh(1.0, 1.0)
    with pytest.raises(OpError, match=r"3 slopes need 3 channels on axis 1 of the input, got"):
        nn.PReLU(3)(tf.ones(2, 4))
    with pytest.raises(ValueError, match="num_parameters must be a whole number >= 1"):
        nn.PReLU(0)


def test_compile_hands_back_the_model_or_function():
    model = nn.Linear(2, 2)
    assert tf.compile(model) is model
    assert tf.compile(mode="reduce-overhead")(len) is len
    with pytest.raises(TypeError, match="expected a module or a function, got int"):
        tf.compile(3)
