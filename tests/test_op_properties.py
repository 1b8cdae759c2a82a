"""Properties that explain the ops: what softmax, attention, losses and friends guarantee."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinyformer as tf
import tinyformer.nn as nn
import tinyformer.nn.functional as F
from tinyformer.ops.gelu import erfc


def t64(a, grad=True):
    return tf.Tensor(np.asarray(a, np.float64), requires_grad=grad)


@given(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3), elements=st.floats(-50, 50))
)
def test_softmax_rows_sum_to_one(x):
    y = F.softmax(tf.Tensor(x), axis=-1).data
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-12)
    assert (y >= 0).all()


def test_log_softmax_and_cross_entropy_stay_finite_for_huge_logits():
    logits = t64([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]])
    logp = F.log_softmax(logits)
    assert np.isfinite(logp.data).all()
    loss = F.cross_entropy(logits, [1, 0], label_smoothing=0.1)
    loss.backward()
    assert np.isfinite(loss.data).all() and np.isfinite(logits.grad).all()
    np.testing.assert_allclose(logp.data[0], [0.0, -2e4, -1e4])


def _qkv(b=2, t=6, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return [t64(rng.standard_normal((b, t, d))) for _ in range(3)]


def test_causal_attention_never_looks_ahead():
    q, k, v = _qkv()
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).data
    k2, v2 = k.data.copy(), v.data.copy()
    k2[:, 4:], v2[:, 4:] = 100.0, -100.0  # change tokens 4 and 5
    y2 = F.scaled_dot_product_attention(q, t64(k2), t64(v2), is_causal=True).data
    np.testing.assert_array_equal(y[:, :4], y2[:, :4])
    assert not np.allclose(y[:, 4:], y2[:, 4:])


def test_causal_gradient_of_an_early_output_ignores_later_tokens():
    q, k, v = _qkv()
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y[:, 2].sum().backward()
    assert np.all(k.grad[:, 3:] == 0) and np.all(v.grad[:, 3:] == 0)
    assert np.any(k.grad[:, :3] != 0)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = _qkv(b=1, t=3)
    mask = np.ones((3, 3), bool)
    mask[1] = False  # query 1 may attend to nothing
    y, w = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    (y * y).sum().backward()
    assert np.isfinite(y.data).all() and np.all(y.data[:, 1] == 0)
    assert np.all(w.data[:, 1] == 0)
    np.testing.assert_allclose(w.data[:, [0, 2]].sum(-1), 1.0)
    for t in (q, k, v):
        assert np.isfinite(t.grad).all()
    assert np.all(q.grad[:, 1] == 0)


def test_boolean_and_additive_masks_agree():
    q, k, v = _qkv(seed=3)
    keep = np.random.default_rng(1).random((6, 6)) < 0.6
    keep[:, 0] = True
    additive = np.where(keep, 0.0, -np.inf)
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep).data
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=additive).data
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_attention_matches_the_textbook_formula():
    q, k, v = _qkv(seed=4)
    s = q.data @ np.swapaxes(k.data, -1, -2) / math.sqrt(4)
    s = np.where(np.tri(6, dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).data
    np.testing.assert_allclose(y, p @ v.data, rtol=1e-12)


def test_attention_takes_pytorchs_arguments_in_pytorchs_order():
    # nanoGPT's call, positionally: (q, k, v, attn_mask, dropout_p, is_causal). Without
    # dropout_p the 0.0 became is_causal and True became the scale, silently.
    q, k, v = _qkv(seed=5)
    causal = F.scaled_dot_product_attention(q, k, v, is_causal=True).data
    np.testing.assert_array_equal(
        F.scaled_dot_product_attention(q, k, v, None, 0.0, True).data, causal
    )
    with pytest.raises(tf.OpError, match=r"dropout_p must be in \[0, 1\], got 1.5"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)


def test_arguments_pytorch_has_in_other_places_are_keywords_only():
    # PyTorch's max_pool2d(x, k, s, p, d, ceil_mode) and avg_pool2d(x, k, s, p, ceil_mode):
    # positionally, each landed on another argument here
    image = t64(np.ones((1, 1, 4, 4)))
    with pytest.raises(TypeError):
        F.max_pool2d(image, 2, 2, 0, 1, False)
    with pytest.raises(TypeError):
        F.avg_pool2d(image, 2, 2, 0, False)
    with pytest.raises(TypeError):
        tf.nn.Attention(8, 2, 0.1)  # PyTorch's dropout: it was bias=0.1 here
    with pytest.raises(TypeError):
        tf.nn.LayerNorm(8, 1e-5, False)  # PyTorch's elementwise_affine: it was bias here


def test_attention_dropout_drops_weights_and_rescales_the_rest():
    q, k, v = _qkv(seed=6)
    mask = np.tri(6, dtype=bool)
    mask[2] = False  # a row that sees no key: 0, as without dropout
    _, w = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, return_weights=True)
    tf.manual_seed(0)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.3)
    tf.manual_seed(0)
    dropped = F.dropout(t64(w.data), 0.3).data  # the same draw from the same generator
    np.testing.assert_allclose(y.data, dropped @ v.data, rtol=1e-12)
    assert np.all(y.data[:, 2] == 0) and 0 < np.mean(dropped[w.data > 0] == 0) < 0.6
    tf.manual_seed(0)
    y.sum().backward()  # finite gradients, none through the empty row's query
    assert np.isfinite(q.grad).all() and np.all(q.grad[:, 2] == 0)

    def seeded(q, k, v):  # one mask for every evaluation gradcheck makes
        tf.manual_seed(1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.3)

    assert tf.gradcheck(seeded, [t64(a.data) for a in (q, k, v)])


def test_erfc_is_accurate_to_float64():
    z = np.linspace(-6, 27, 20001)
    exact = np.array([math.erfc(v) for v in z])
    assert np.abs(erfc(z) - exact).max() < 2e-15


def test_gelu_tanh_form_approximates_the_exact_form():
    x = tf.Tensor(np.linspace(-5, 5, 1001))
    exact, approx = F.gelu(x).data, F.gelu(x, approximate="tanh").data
    assert np.abs(exact - approx).max() < 1e-3


def test_max_splits_the_gradient_evenly_at_ties():
    x = t64([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    x.max(axis=1).sum().backward()
    np.testing.assert_allclose(x.grad, [[0, 0.5, 0.5], [0.5, 0, 0.5]])


def test_maximum_gives_half_to_each_at_ties():
    a, b = t64([1.0, 2.0]), t64([1.0, 0.0])
    tf.maximum(a, b).sum().backward()
    np.testing.assert_allclose(a.grad, [0.5, 1.0])
    np.testing.assert_allclose(b.grad, [0.5, 0.0])


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk->ik", [(2, 1), (3, 4)]),  # j summed, length 1 in the first operand
        ("ij,jk->ik", [(2, 3), (1, 4)]),
        ("i,i->", [(1,), (3,)]),
        ("ij,j->i", [(2, 3), (1,)]),
        ("ij,jk,kl->il", [(2, 3), (1, 4), (4, 2)]),
    ],
)
def test_einsum_gradient_of_a_summed_letter_that_broadcasts(equation, shapes):
    # each element of the length-1 axis met every element of the other operand's j: its
    # gradient is summed back over j, to the operand's own shape
    rng = np.random.default_rng(0)
    xs = [t64(rng.standard_normal(shape)) for shape in shapes]
    tf.einsum(equation, *xs).sum().backward()
    assert [x.grad.shape for x in xs] == shapes
    assert tf.gradcheck(lambda *a: tf.einsum(equation, *a), xs)


def test_repeated_indices_accumulate_in_embedding_and_getitem():
    w = t64(np.arange(8.0).reshape(4, 2))
    F.embedding(np.array([[1, 1], [3, 1]]), w).sum().backward()
    np.testing.assert_allclose(w.grad[:, 0], [0, 3, 0, 1])
    x = t64([1.0, 2.0, 3.0])
    x[np.array([0, 0, 2])].sum().backward()
    np.testing.assert_allclose(x.grad, [2, 0, 1])


def test_embedding_padding_idx_gets_no_gradient():
    w = t64(np.ones((4, 2)))
    F.embedding(np.array([0, 2, 0]), w, padding_idx=0).sum().backward()
    np.testing.assert_allclose(w.grad, [[0, 0], [0, 0], [1, 1], [0, 0]])


def test_cross_entropy_is_the_negative_log_likelihood():
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((5, 4)), np.array([0, 3, 1, 1, 2])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    loss = F.cross_entropy(t64(logits), target).item()
    np.testing.assert_allclose(loss, -logp[np.arange(5), target].mean(), rtol=1e-12)
    smooth = F.cross_entropy(t64(logits), target, label_smoothing=0.2).item()
    expected = (0.8 * -logp[np.arange(5), target] - 0.2 * logp.mean(1)).mean()
    np.testing.assert_allclose(smooth, expected, rtol=1e-12)


def test_cross_entropy_mean_skips_ignored_rows():
    logits = t64(np.random.default_rng(1).standard_normal((4, 3)))
    target = np.array([2, -100, 0, -100])
    per_row = F.cross_entropy(logits, target, reduction="none").data
    assert per_row[1] == 0 and per_row[3] == 0
    mean = F.cross_entropy(logits, target).item()
    np.testing.assert_allclose(mean, per_row.sum() / 2)
    assert math.isnan(F.cross_entropy(logits, np.full(4, -100)).item())


def test_cross_entropy_accepts_class_axis_one_like_pytorch():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((2, 5, 3))  # (N, C, T)
    target = rng.integers(0, 5, (2, 3))
    a = F.cross_entropy(t64(logits), target).item()
    b = F.cross_entropy(t64(logits.transpose(0, 2, 1).reshape(6, 5)), target.reshape(6)).item()
    np.testing.assert_allclose(a, b, rtol=1e-12)


# nll_loss after log_softmax over the classes is cross_entropy: values and gradients, for every
# reduction, classes on axis 1 of a (N, C, T) input, and an ignored row.
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_of_log_softmax_is_cross_entropy(reduction):
    rng = np.random.default_rng(3)
    logits, target = rng.standard_normal((3, 5, 4)), rng.integers(0, 5, (3, 4))
    target[1, 2] = -100
    results = []
    for two_step in (True, False):
        z = t64(logits)
        if two_step:
            loss = F.nll_loss(F.log_softmax(z, axis=1), target, reduction=reduction)
        else:
            loss = F.cross_entropy(z, target, reduction=reduction)
        loss.sum().backward()
        results.append((loss.data, z.grad))
    (a, ga), (b, gb) = results
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-15)


def test_class_weights_are_pytorchs_third_argument_and_weigh_each_rows_class():
    rng = np.random.default_rng(3)
    logits, target = rng.standard_normal((6, 4)), np.array([0, 3, 3, 1, 2, -100])
    w = np.array([0.5, 2.0, 1.0, 3.0])
    per_row = F.cross_entropy(t64(logits), target, reduction="none").data
    kept = target != -100
    w_rows = np.where(kept, w[np.where(kept, target, 0)], 0.0)
    weighted = F.cross_entropy(t64(logits), target, w)  # positional, as in PyTorch
    assert weighted.item() == pytest.approx((w_rows * per_row).sum() / w_rows.sum(), rel=1e-12)
    lp = F.log_softmax(t64(logits), axis=1)
    assert F.nll_loss(lp, target, w).item() == pytest.approx(weighted.item(), rel=1e-12)
    # Weights of 1 change nothing, label smoothing included, gradients included.
    for eps in (0.0, 0.2):
        grads = []
        for weight in (None, np.ones(4)):
            z = t64(logits)
            z.requires_grad = True
            loss = F.cross_entropy(z, target, weight, label_smoothing=eps)
            loss.backward()
            grads.append((loss.item(), z.grad.copy()))
        assert grads[0][0] == pytest.approx(grads[1][0], rel=1e-12)
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-10, atol=1e-15)
    # All kept rows weighted 0: mean of nothing, NaN (as PyTorch).
    assert math.isnan(F.cross_entropy(t64(logits), np.array([1] * 6), w * [1, 0, 1, 1]).item())


def test_class_weights_of_the_wrong_shape_are_refused_with_the_shapes():
    x, target = t64(np.ones((2, 3))), np.array([0, 1])
    with pytest.raises(tf.OpError, match=r"cross_entropy: weight must hold one number per class, "
                       r"shape \(3,\), got \(4,\)"):  # fmt: skip
        F.cross_entropy(x, target, np.ones(4))
    with pytest.raises(tf.OpError, match=r"nll_loss: weight must hold one number per class"):
        F.nll_loss(x, target, np.ones((3, 1)))
    with pytest.raises(tf.OpError, match=r"nll_loss: weight must be real numbers, got bool"):
        F.nll_loss(x, target, np.ones(3, bool))


def test_nll_loss_reads_one_entry_a_row_and_names_itself_in_errors():
    lp = t64(np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])))
    loss = nn.NLLLoss()(lp, np.array([1, 2]))
    np.testing.assert_allclose(loss.item(), -(np.log(0.25) + np.log(0.8)) / 2, rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(lp.grad, [[0, -0.5, 0], [0, 0, -0.5]])
    assert repr(nn.NLLLoss(reduction="sum")) == "NLLLoss(ignore_index=-100, reduction='sum')"
    with pytest.raises(tf.OpError, match=r"nll_loss: target 3 at position \(1,\) is out of range"):
        F.nll_loss(lp, np.array([0, 3]))
    with pytest.raises(tf.OpError, match=r"nll_loss: target of shape \(3,\) does not fit input"):
        F.nll_loss(lp, np.array([0, 1, 2]))
    with pytest.raises(tf.OpError, match="nll_loss: target must hold integer class indices"):
        F.nll_loss(lp, np.array([0.0, 1.0]))


def test_layer_norm_normalises_each_row():
    x = tf.Tensor(np.random.default_rng(0).standard_normal((4, 16)) * 5 + 3)
    y = F.layer_norm(x, 16, eps=0.0).data
    np.testing.assert_allclose(y.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(1), 1, rtol=1e-10)


def test_var_and_std_follow_the_correction():
    a = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(tf.var(tf.Tensor(a), 1).data, a.var(1, ddof=1))
    np.testing.assert_allclose(tf.std(tf.Tensor(a), 1, correction=0).data, a.std(1))


def test_dropout_is_reproducible_scaled_and_off_in_eval():
    x = tf.ones(100_000)
    tf.manual_seed(0)
    a = F.dropout(x, p=0.3).data
    tf.manual_seed(0)
    b = F.dropout(x, p=0.3).data
    np.testing.assert_array_equal(a, b)
    assert abs((a == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(a[a != 0], 1 / 0.7, rtol=1e-6)
    assert F.dropout(x, p=0.3, training=False) is x


def test_dropout_gradient_uses_the_same_mask():
    x = t64(np.ones(1000))
    y = F.dropout(x, p=0.5, seed=7)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, y.data)


def test_rms_norm_is_layer_norm_on_rows_of_mean_zero():
    # With the mean already 0, layer_norm's variance is rms_norm's mean square: same values,
    # and the same gradients along directions that keep the mean 0.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 8))
    x -= x.mean(axis=1, keepdims=True)
    w, gy = rng.uniform(0.5, 1.5, 8), rng.standard_normal((5, 8))
    gy -= gy.mean(axis=1, keepdims=True)
    results = []
    for norm in (F.rms_norm, F.layer_norm):
        xt, wt = t64(x), t64(w)
        y = norm(xt, 8, wt, eps=1e-6)
        (y * tf.Tensor(gy)).sum().backward()
        results.append((y.data, xt.grad - xt.grad.mean(axis=1, keepdims=True), wt.grad))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    y = nn.RMSNorm(8, elementwise_affine=False, dtype=np.float64)(tf.Tensor(x * 7)).data
    np.testing.assert_allclose(np.mean(y * y, axis=1), 1.0, rtol=1e-10)  # eps = float64's


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rms_norm_default_eps_is_the_dtype_epsilon(dtype):
    # As in PyTorch. A row of small mean square, where eps shows: float32's epsilon moves it
    # by ~4e-4 relative to float64's.
    x = tf.Tensor(np.array([[0.01, -0.012, 0.02]], dtype))
    ours = F.rms_norm(x, 3).data
    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours, F.rms_norm(x, 3, eps=float(np.finfo(dtype).eps)).data)
    assert not np.array_equal(ours, F.rms_norm(x, 3, eps=1e-6).data)


def test_rms_norm_checks_shapes():
    assert list(nn.RMSNorm((2, 3)).state_dict()) == ["weight"]
    assert list(nn.RMSNorm(3, elementwise_affine=False).state_dict()) == []
    with pytest.raises(tf.OpError, match=r"rms_norm: input of shape \(4, 5\) does not end in"):
        F.rms_norm(tf.zeros(4, 5), 6)
    with pytest.raises(tf.OpError, match=r"rms_norm: weight has shape \(4,\), expected \(5,\)"):
        F.rms_norm(tf.zeros(4, 5), 5, tf.ones(4))


def test_silu_is_x_times_its_sigmoid():
    x = np.linspace(-30, 30, 61)
    a, b = t64(x), t64(x)
    F.silu(a).sum().backward()
    (b * F.sigmoid(b)).sum().backward()
    np.testing.assert_allclose(F.silu(a).data, (b * F.sigmoid(b)).data, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(a.grad, b.grad, rtol=1e-12, atol=1e-300)
    np.testing.assert_array_equal(nn.SiLU()(a).data, F.silu(a).data)


def test_bce_with_logits_is_two_class_cross_entropy():
    # sigmoid(x) is softmax([0, x])[1]: binary cross-entropy of 0/1 labels under logits x is
    # cross-entropy over the two logits [0, x], in values and gradients.
    rng = np.random.default_rng(5)
    x, t = rng.standard_normal(6) * 3, rng.integers(0, 2, 6)
    a, b = t64(x), t64(x)
    F.binary_cross_entropy_with_logits(a, t).backward()
    F.cross_entropy(tf.stack([tf.zeros(6, dtype=np.float64), b], axis=1), t).backward()
    np.testing.assert_allclose(a.grad, b.grad, rtol=1e-12)
    loss = F.binary_cross_entropy_with_logits(t64(x), t, reduction="none").data
    np.testing.assert_allclose(loss, -np.log(np.where(t, 1, -1) / (1 + np.exp(-x)) + (1 - t)))


def test_bce_with_logits_stays_finite_and_weighs_positives():
    x = t64([-1e4, -30.0, 0.0, 30.0, 1e4])
    loss = F.binary_cross_entropy_with_logits(x, [1, 1, 1, 0, 0], reduction="none")
    loss.sum().backward()
    np.testing.assert_allclose(loss.data, [1e4, 30.0, math.log(2), 30.0, 1e4], rtol=1e-12)
    np.testing.assert_allclose(x.grad, [-1, -1, -0.5, 1, 1], atol=1e-12)
    logits, labels = t64([[0.3, -1.2]]), [[1, 0]]
    plain = F.binary_cross_entropy_with_logits(logits, labels, reduction="none").data
    weighed = nn.BCEWithLogitsLoss(reduction="none", pos_weight=[4.0, 4.0])(logits, labels).data
    np.testing.assert_allclose(weighed, plain * [[4, 1]], rtol=1e-12)  # positives count 4 times


def test_bce_with_logits_names_itself_in_errors():
    x = tf.zeros(4, 3)
    with pytest.raises(tf.OpError, match=r"with_logits: input \(4, 3\) and target \(4,\) must"):
        F.binary_cross_entropy_with_logits(x, np.zeros(4))
    with pytest.raises(tf.OpError, match=r"with_logits: pos_weight of shape \(4,\) does not"):
        F.binary_cross_entropy_with_logits(x, np.zeros((4, 3)), pos_weight=np.ones(4))
    with pytest.raises(tf.OpError, match="with_logits: reduction must be mean, sum or none"):
        F.binary_cross_entropy_with_logits(x, np.zeros((4, 3)), reduction="avg")
