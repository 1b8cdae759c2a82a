"""What needs no PyTorch to check in the added losses (margin ranking, triplet, cosine
embedding, soft margin, multilabel soft margin, Gaussian and Poisson NLL) and distances: their
reductions, their errors (each naming the function and the shapes), and the textbook forms they
reduce to."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.autograd import OpError
from tinyformer.nn import functional as F


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- losses -------------------------------------------------------------------------------------


def test_ranking_and_embedding_losses_vanish_when_the_margin_is_met():
    x1, x2 = tf.tensor([3.0, 0.0]), tf.tensor([1.0, 2.5])
    assert F.margin_ranking_loss(x1, x2, tf.tensor([1.0, -1.0]), margin=2.0).item() == 0
    assert F.margin_ranking_loss(x1, x2, tf.tensor([-1.0, 1.0])).item() == pytest.approx(2.25)
    a = tf.tensor(_x(4, 3))
    far = a + 10.0  # negatives much farther than the positives
    assert F.triplet_margin_loss(a, a + 0.01, far).item() == 0
    close = F.triplet_margin_loss(a, far, a + 0.01, margin=0.5, reduction="none").data
    np.testing.assert_allclose(close, 0.5 + np.sqrt(3) * 10.0 - np.sqrt(3) * 0.01, rtol=1e-4)
    v = tf.tensor(_x(4, 3))
    np.testing.assert_allclose(
        F.cosine_embedding_loss(v, v * 2.0, tf.tensor([1, 1, 1, 1])).data, 0, atol=1e-12
    )
    opposite = F.cosine_embedding_loss(v, -v, np.array([1, -1, 0, 1]), reduction="none").data
    np.testing.assert_allclose(opposite, [2.0, 0.0, 0.0, 2.0], atol=1e-12)


def test_triplet_swap_uses_the_closer_negative():
    a, p, n = tf.tensor([[0.0, 0.0]]), tf.tensor([[3.0, 0.0]]), tf.tensor([[4.0, 0.0]])
    plain = F.triplet_margin_loss(a, p, n, margin=1.0, eps=0.0).item()  # 1 + 3 - 4
    swapped = F.triplet_margin_loss(a, p, n, margin=1.0, eps=0.0, swap=True).item()  # 1 + 3 - 1
    assert plain == pytest.approx(0.0) and swapped == pytest.approx(3.0)


def test_soft_margin_losses_are_logistic_losses():
    x, y = _x(5, 4), np.sign(_x(5, 4, seed=1))
    np.testing.assert_allclose(
        F.soft_margin_loss(tf.tensor(x), y, reduction="none").data, np.log1p(np.exp(-y * x))
    )
    big = F.soft_margin_loss(tf.tensor([-1000.0, 1000.0]), np.array([1.0, -1.0]), reduction="sum")
    assert big.item() == pytest.approx(2000.0)  # no overflow
    t = (y > 0).astype(float)
    bce = F.binary_cross_entropy_with_logits(tf.tensor(x), t, reduction="none").data
    per_sample = F.multilabel_soft_margin_loss(tf.tensor(x), t, reduction="none").data
    np.testing.assert_allclose(per_sample, bce.mean(axis=1), rtol=1e-12)
    w = np.array([1.0, 0.0, 2.0, 0.5])
    weighted = F.multilabel_soft_margin_loss(tf.tensor(x), t, w, reduction="sum").item()
    assert weighted == pytest.approx((bce * w).mean(axis=1).sum(), rel=1e-12)


def test_likelihood_losses_reduce_to_their_textbook_forms():
    x, t = _x(4, 3), _x(4, 3, seed=1)
    mse = ((x - t) ** 2).mean()
    assert F.gaussian_nll_loss(tf.tensor(x), t, 1.0).item() == pytest.approx(mse / 2)
    full = F.gaussian_nll_loss(tf.tensor(x), t, np.ones(4), full=True).item()
    assert full == pytest.approx(mse / 2 + 0.5 * math.log(2 * math.pi))
    rate, counts = np.exp(_x(6, seed=2)), np.array([0.0, 1.0, 2.0, 3.0, 5.0, 8.0])
    log_form = F.poisson_nll_loss(tf.tensor(np.log(rate)), counts, reduction="none").data
    rate_form = F.poisson_nll_loss(tf.tensor(rate), counts, False, eps=0.0, reduction="none").data
    np.testing.assert_allclose(log_form, rate_form, rtol=1e-12)
    with_stirling = F.poisson_nll_loss(
        tf.tensor(np.log(rate)), counts, True, True, reduction="none"
    )
    c = np.maximum(counts, 1)  # the term counts above 1 only: no log of 0
    stirling = c * np.log(c) - c + 0.5 * np.log(2 * np.pi * c)
    np.testing.assert_allclose(with_stirling.data - log_form, np.where(counts > 1, stirling, 0))


def test_gaussian_nll_loss_clamps_var_and_passes_its_gradient_through():
    var = tf.tensor(np.array([1e-9, 0.5]), requires_grad=True)
    loss = F.gaussian_nll_loss(tf.tensor(np.zeros(2)), np.array([1e-3, 1.0]), var, eps=1e-6)
    loss.backward()
    v = np.array([1e-6, 0.5])  # the first variance clamped to eps
    np.testing.assert_allclose(loss.item(), (0.5 * (np.log(v) + np.array([1e-6, 1.0]) / v)).mean())
    np.testing.assert_allclose(var.grad, 0.25 * (1 / v - np.array([1e-6, 1.0]) / v**2))


LOSSES = {
    "margin_ranking_loss": lambda r: F.margin_ranking_loss(
        tf.zeros(3), tf.zeros(3), tf.ones(3), reduction=r
    ),
    "triplet_margin_loss": lambda r: F.triplet_margin_loss(
        tf.zeros(2, 3), tf.ones(2, 3), tf.ones(2, 3), reduction=r
    ),
    "cosine_embedding_loss": lambda r: F.cosine_embedding_loss(
        tf.ones(2, 3), tf.ones(2, 3), np.array([1, -1]), reduction=r
    ),
    "soft_margin_loss": lambda r: F.soft_margin_loss(tf.zeros(3), tf.ones(3), reduction=r),
    "multilabel_soft_margin_loss": lambda r: F.multilabel_soft_margin_loss(
        tf.zeros(2, 3), tf.ones(2, 3), reduction=r
    ),
    "gaussian_nll_loss": lambda r: F.gaussian_nll_loss(tf.zeros(3), tf.zeros(3), 1.0, reduction=r),
    "poisson_nll_loss": lambda r: F.poisson_nll_loss(tf.zeros(3), tf.zeros(3), reduction=r),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_reduce_as_asked_and_refuse_other_reductions(name):
    none = LOSSES[name]("none")
    assert LOSSES[name]("sum").item() == pytest.approx(none.data.sum())
    assert LOSSES[name]("mean").item() == pytest.approx(none.data.mean())
    with pytest.raises(OpError, match=f"{name}: reduction must be mean, sum or none, got 'avg'"):
        LOSSES[name]("avg")


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: F.margin_ranking_loss(tf.zeros(3), tf.zeros(3, 1), tf.ones(3)),
            r"margin_ranking_loss: input1 \(3,\), input2 \(3, 1\) and target \(3,\) must have "
            "the same number of axes",
        ),
        (
            lambda: F.margin_ranking_loss(tf.zeros(3), tf.zeros(4), tf.ones(3)),
            r"margin_ranking_loss: the shapes of input1 \(3,\), input2 \(4,\), target \(3,\) "
            "do not broadcast",
        ),
        (
            lambda: F.triplet_margin_loss(tf.zeros(2, 3), tf.zeros(3), tf.zeros(2, 3)),
            r"triplet_margin_loss: anchor \(2, 3\), positive \(3,\) and negative \(2, 3\)",
        ),
        (
            lambda: F.triplet_margin_loss(tf.zeros(3), tf.zeros(3), tf.zeros(3), margin=0.0),
            "triplet_margin_loss: margin must be greater than 0",
        ),
        (
            lambda: F.cosine_embedding_loss(tf.zeros(2, 3), tf.zeros(2, 4), np.ones(2)),
            r"cosine_embedding_loss: input1 \(2, 3\) and input2 \(2, 4\) must have one shape",
        ),
        (
            lambda: F.cosine_embedding_loss(tf.zeros(2, 3), tf.zeros(2, 3), np.ones(3)),
            r"cosine_embedding_loss: target must be of shape \(2,\) .* got shape \(3,\)",
        ),
        (
            lambda: F.soft_margin_loss(tf.zeros(3, 1), tf.ones(3)),
            r"soft_margin_loss: input \(3, 1\) and target \(3,\) must have the same shape",
        ),
        (
            lambda: F.multilabel_soft_margin_loss(tf.zeros(2, 3), tf.ones(2, 3), np.ones(2)),
            r"multilabel_soft_margin_loss: the shapes of input \(2, 3\), weight \(2,\)",
        ),
        (
            lambda: F.gaussian_nll_loss(tf.zeros(4, 3), tf.zeros(4, 3), tf.ones(2, 3)),
            r"gaussian_nll_loss: var \(2, 3\) must be input's shape \(4, 3\)",
        ),
        (
            lambda: F.gaussian_nll_loss(tf.zeros(4, 3), tf.zeros(4, 3), -np.ones(4)),
            "gaussian_nll_loss: var has negative entries",
        ),
        (
            lambda: F.gaussian_nll_loss(tf.zeros(4, 3), tf.zeros(4, 3), -1.0),
            "gaussian_nll_loss: var must be >= 0",
        ),
        (
            lambda: F.gaussian_nll_loss(tf.zeros(4, 1), tf.zeros(4, 3), 1.0),
            r"gaussian_nll_loss: target \(4, 3\) must broadcast to input \(4, 1\)",
        ),
        (
            lambda: F.poisson_nll_loss(tf.zeros(3), tf.zeros(2)),
            r"poisson_nll_loss: input \(3,\) and target \(2,\) must have the same shape",
        ),
        (
            lambda: F.pairwise_distance(tf.zeros(2, 3), tf.zeros(4, 3)),
            r"pairwise_distance: the shapes of x1 \(2, 3\), x2 \(4, 3\) do not broadcast",
        ),
        (
            lambda: F.pairwise_distance(tf.zeros(2, 3), tf.zeros(2, 3), p=0.5),
            "pairwise_distance: p must be a number >= 1",
        ),
    ],
)
def test_losses_and_distances_refuse_mismatched_shapes_naming_them(call, message):
    with pytest.raises(OpError, match=message):
        call()


def test_loss_modules_refuse_deprecated_arguments_and_bad_reductions():
    with pytest.raises(ValueError, match="MarginRankingLoss: size_average and reduce are"):
        nn.MarginRankingLoss(0.0, True)
    with pytest.raises(ValueError, match="PoissonNLLLoss: reduction must be mean, sum or none"):
        nn.PoissonNLLLoss(reduction="batchmean")
    with pytest.raises(ValueError, match="TripletMarginLoss: margin must be greater than 0"):
        nn.TripletMarginLoss(margin=-1.0)
    assert "reduction='sum'" in repr(nn.SoftMarginLoss(reduction="sum"))


def test_distance_modules_are_their_functions():
    x1, x2 = tf.tensor(_x(4, 3)), tf.tensor(_x(4, 3, seed=1))
    d = nn.PairwiseDistance(keepdim=True)(x1, x2).data
    np.testing.assert_allclose(d[:, 0], np.linalg.norm(x1.data - x2.data + 1e-6, axis=1))
    cos = nn.CosineSimilarity(dim=0)(x1, x2).data
    np.testing.assert_allclose(cos, F.cosine_similarity(x1, x2, dim=0).data)
    assert cos.shape == (3,)
