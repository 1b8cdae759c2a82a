"""EmbeddingBag, Embedding.from_pretrained, the instance norms, the padding modes and layers,
and cross-entropy against class probabilities, each against PyTorch's own (float64, values and
gradients) with `compare` (test_torch_layers.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.nn import functional as F

from .test_torch_layers import _load, compare

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _bag_pair(mode, **kw):
    theirs = torch.nn.EmbeddingBag(7, 3, mode=mode, **kw).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(_x(7, 3, seed=3)))
    return _load(nn.EmbeddingBag(7, 3, mode=mode, **kw), theirs), theirs


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_with_offsets_matches_pytorch(mode, padding_idx):
    ours, theirs = _bag_pair(mode, padding_idx=padding_idx)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 6, 2, 0])  # bag 1 empty, bag 3 only padding (idx 2)
    offsets = np.array([0, 3, 3, 8])
    compare(ours, theirs, idx, offsets)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_of_fixed_bags_matches_pytorch(mode):
    ours, theirs = _bag_pair(mode)
    compare(ours, theirs, np.array([[1, 2, 4], [5, 4, 4], [0, 6, 3]]))


def test_embedding_bag_include_last_offset_and_sample_weights_match_pytorch():
    ours, theirs = _bag_pair("sum", include_last_offset=True)
    # PyTorch runs the last bag to the input's end whatever the last offset says: idx[5] is in it
    idx, offsets = np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2, 5])
    weights = np.random.default_rng(1).uniform(0.5, 2.0, 6)
    compare(
        ours, theirs, idx, offsets, weights,
        call=lambda m, i, o, w: m(i, o, per_sample_weights=w),
    )  # fmt: skip


def test_embedding_from_pretrained_matches_pytorch():
    table = _x(5, 4, seed=4)
    for freeze in (True, False):
        ours = nn.Embedding.from_pretrained(tf.tensor(table), freeze=freeze, padding_idx=1)
        theirs = torch.nn.Embedding.from_pretrained(
            torch.from_numpy(table), freeze=freeze, padding_idx=1
        )
        assert ours.weight.requires_grad == theirs.weight.requires_grad == (not freeze)
        idx = np.array([[0, 1], [4, 1]])
        if freeze:  # nothing to differentiate
            np.testing.assert_array_equal(ours(idx).data, theirs(torch.from_numpy(idx)).numpy())
        else:
            compare(ours, theirs, idx)
    bag = nn.EmbeddingBag.from_pretrained(table, mode="sum")
    assert not bag.weight.requires_grad
    np.testing.assert_allclose(bag(np.array([[0, 3]])).data, (table[0] + table[3])[None])


@pytest.mark.parametrize(
    "name, shape, affine",
    [
        ("InstanceNorm2d", (2, 3, 4, 5), False),
        ("InstanceNorm2d", (2, 3, 4, 5), True),
        ("InstanceNorm2d", (3, 4, 4), True),  # no batch axis
        ("InstanceNorm1d", (2, 3, 6), True),
        ("InstanceNorm1d", (3, 6), False),
    ],
)
def test_instance_norm_matches_pytorch(name, shape, affine):
    theirs = getattr(torch.nn, name)(3, affine=affine).double()
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(_x(*p.shape, seed=2)))
    ours = _load(getattr(nn, name)(3, affine=affine), theirs)
    compare(ours, theirs, _x(*shape))
    ours.eval(), theirs.eval()  # no running statistics: the same in eval
    compare(ours, theirs, _x(*shape, seed=1))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    "shape, pad",
    [((2, 3, 5), (2, 1)), ((1, 2, 4, 5), (1, 2, 3, 0)), ((2, 1, 3, 4, 4), (1, 1, 2, 0, 1, 2))],
)
def test_pad_modes_match_pytorch(mode, shape, pad):
    compare(
        nn.Identity(), torch.nn.Identity(), _x(*shape),
        call=lambda m, x: (F if isinstance(x, tf.Tensor) else torch.nn.functional).pad(
            m(x), pad, mode=mode
        ),
    )  # fmt: skip


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("ReflectionPad1d", (2,), (2, 3, 4)),
        ("ReflectionPad2d", ((1, 2, 0, 3),), (1, 2, 4, 5)),
        ("ReplicationPad1d", ((3, 1),), (2, 4)),
        ("ReplicationPad2d", (2,), (1, 2, 3, 3)),
        ("ZeroPad2d", ((1, 0, 2, 1),), (2, 3, 3)),
        ("ConstantPad1d", (2, 3.5), (2, 3, 4)),
        ("ConstantPad2d", ((1, 1, 0, 2), -1.0), (1, 2, 3)),
    ],
)
def test_padding_layers_match_pytorch(name, args, shape):
    compare(getattr(nn, name)(*args), getattr(torch.nn, name)(*args), _x(*shape))


@pytest.mark.parametrize(
    "shape, kw",
    [
        ((4, 5), {}),
        ((4, 5), {"label_smoothing": 0.2}),
        ((4, 5), {"reduction": "none", "weight": True}),
        ((2, 5, 3), {"reduction": "sum", "label_smoothing": 0.1, "weight": True}),
        ((2, 5, 3), {"reduction": "none"}),
        ((5,), {}),
    ],
)
def test_cross_entropy_with_class_probabilities_matches_pytorch(shape, kw):
    rng = np.random.default_rng(5)
    logits, target = rng.standard_normal(shape), rng.random(shape)
    target /= target.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    if kw.pop("weight", False):
        kw["weight"] = rng.uniform(0.5, 2.0, 5)

    def call(m, x, t):
        if isinstance(x, tf.Tensor):
            return F.cross_entropy(x, t, **kw)
        w = kw.get("weight")
        w = None if w is None else torch.from_numpy(w)
        return torch.nn.functional.cross_entropy(x, t, **{**kw, "weight": w})

    compare(nn.Identity(), torch.nn.Identity(), logits, target, call=call)  # target gets a grad
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(tf.tensor(logits), tf.tensor(target))
    expected = torch.nn.CrossEntropyLoss(label_smoothing=0.1)(
        torch.from_numpy(logits), torch.from_numpy(target)
    )
    np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-12)


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("Mish", (), (4, 5)),
        ("Hardtanh", (), (4, 5)),
        ("Hardtanh", (-0.5, 2.0), (3, 4)),
        ("ReLU6", (), (4, 5)),
        ("PReLU", (), (2, 3, 4)),
        ("PReLU", (3, 0.1), (2, 3, 4, 4)),
    ],
)
def test_more_activations_match_pytorch(name, args, shape):
    theirs = getattr(torch.nn, name)(*args).double()
    with torch.no_grad():  # slopes that differ per channel, so that each one's gradient counts
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(np.random.default_rng(2).uniform(0.05, 0.5, p.shape)))
    ours = _load(getattr(nn, name)(*args), theirs)
    x = _x(*shape) * (4.0 if name in ("ReLU6", "Hardtanh") else 1.0)
    x[np.isclose(np.abs(x), 1.0, atol=1e-3)] += 0.01  # away from the clamp's corners
    compare(ours, theirs, x)


def test_dropout2d_drops_the_channels_pytorch_drops_with_the_same_mask():
    x = _x(4, 6, 3, 3)
    ours = F.dropout2d(tf.tensor(x), p=0.4, seed=3)
    kept = np.abs(ours.data).sum(axis=(2, 3)) > 0  # (N, C): whole channels kept or zeroed
    mask = torch.from_numpy(kept[..., None, None] / 0.6)
    np.testing.assert_allclose(ours.data, (torch.from_numpy(x) * mask).numpy(), rtol=1e-15)
    assert 0 < kept.sum() < kept.size
