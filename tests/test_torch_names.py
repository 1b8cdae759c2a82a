"""PyTorch's spellings beside NumPy's (tinyformer/torch_names.py): dim= / keepdim=, x.size(),
nn.Softmax(dim=), nn.LogSoftmax, tf.multinomial, x.long(), clamp, nn.utils.clip_grad_norm_;
and nanoGPT's own lines, as written."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn, random

X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)

# (name, the call with NumPy's names, the same call with PyTorch's)
CALLS = [
    ("sum", lambda x: x.sum(axis=1, keepdims=True), lambda x: x.sum(dim=1, keepdim=True)),
    ("tf.sum", lambda x: tf.sum(x, axis=(0, 2)), lambda x: tf.sum(x, dim=(0, 2))),
    ("mean", lambda x: x.mean(axis=-1, keepdims=True), lambda x: x.mean(dim=-1, keepdim=True)),
    ("tf.mean", lambda x: tf.mean(x, axis=0), lambda x: tf.mean(x, dim=0)),
    ("var", lambda x: x.var(axis=1, keepdims=True), lambda x: x.var(dim=1, keepdim=True)),
    ("std", lambda x: tf.std(x, axis=2, correction=0), lambda x: tf.std(x, dim=2, correction=0)),
    ("logsumexp", lambda x: x.logsumexp(axis=-1), lambda x: x.logsumexp(dim=-1)),
    ("softmax", lambda x: x.softmax(axis=1), lambda x: x.softmax(dim=1)),
    ("F.softmax", lambda x: F.softmax(x, axis=-1), lambda x: F.softmax(x, dim=-1)),
    ("F.log_softmax", lambda x: F.log_softmax(x, axis=-1), lambda x: F.log_softmax(x, dim=-1)),
    ("log_softmax", lambda x: x.log_softmax(axis=0), lambda x: x.log_softmax(dim=0)),
    ("cat", lambda x: tf.cat([x, x], axis=2), lambda x: tf.cat([x, x], dim=2)),
    ("concatenate", lambda x: tf.concatenate([x, x], 1), lambda x: tf.concatenate([x, x], dim=1)),
    ("stack", lambda x: tf.stack([x, x], axis=1), lambda x: tf.stack([x, x], dim=1)),
    ("unsqueeze", lambda x: x.unsqueeze(axis=1), lambda x: x.unsqueeze(dim=1)),
    ("squeeze", lambda x: x[:, :1].squeeze(axis=1), lambda x: x[:, :1].squeeze(dim=1)),
    ("split", lambda x: x.split(2, axis=2)[1], lambda x: x.split(2, dim=2)[1]),
    ("chunk", lambda x: tf.chunk(x, 3, axis=1)[1], lambda x: tf.chunk(x, 3, dim=1)[1]),
]  # fmt: skip


@pytest.mark.parametrize("name, numpy_names, torch_names", CALLS, ids=[c[0] for c in CALLS])
def test_dim_and_keepdim_are_axis_and_keepdims(name, numpy_names, torch_names):
    a, b = tf.tensor(X, requires_grad=True), tf.tensor(X, requires_grad=True)
    ya, yb = numpy_names(a), torch_names(b)
    assert ya.shape == yb.shape and np.array_equal(ya.data, yb.data), name
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    assert np.array_equal(a.grad, b.grad), name


def test_argmax_takes_dim_and_keepdim():
    x = tf.tensor(X)
    assert np.array_equal(
        x.argmax(dim=-1, keepdim=True).data, x.argmax(axis=-1, keepdims=True).data
    )
    assert np.array_equal(tf.argmin(x, dim=1).data, X.argmin(axis=1))


def test_both_names_for_one_argument_is_an_error_naming_them():
    x = tf.tensor(X)
    with pytest.raises(TypeError, match="Tensor.sum: got both axis= and dim="):
        x.sum(axis=0, dim=0)
    with pytest.raises(TypeError, match="mean: got both keepdims= and keepdim="):
        tf.mean(x, 0, keepdims=True, keepdim=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'keepdim"):
        F.softmax(x, keepdim=True)  # softmax has no keepdims: keepdim= is not taken for it


@pytest.mark.parametrize(
    "call, axis, keep",
    [
        ("x.max(dim=1)", 1, False), ("x.min(dim=1)", 1, False),
        ("x.max(1, keepdim=True)", 1, True), ("tf.max(x, dim=0)", 0, False),
        ("tf.min(x.data, dim=-1, keepdim=True)", -1, True),
        # a positional dim on the methods, as in `_, predicted = outputs.max(1)`
        ("x.max(1)", 1, False), ("x.min(-1)", -1, False), ("x.max(0, True)", 0, True),
        ("x.min(np.int64(1))", 1, False),
    ],
)  # fmt: skip
def test_max_and_min_with_pytorchs_names_return_values_and_indices(call, axis, keep):
    # PyTorch's max(dim=) returns (values, indices); `x.max(1, keepdim=True)[0]` is the values
    # there, so it must be here too. NumPy's axis= keeps NumPy's meaning: the values only.
    x = tf.tensor(X)
    op = "min" if "min" in call else "max"
    values, indices = eval(call)
    want = getattr(X, op)(axis=axis, keepdims=keep)
    assert np.array_equal(values.data, want)
    assert np.array_equal(indices.data, getattr(X, f"arg{op}")(axis=axis, keepdims=keep))
    assert np.array_equal(eval(call)[0].data, eval(call).values.data)
    assert np.array_equal(x.max(axis=1).data, X.max(axis=1))
    with pytest.raises(TypeError, match="keepdim= goes with a dim"):
        x.max(keepdim=True)


def test_a_positional_dim_on_the_methods_is_pytorchs_and_on_the_op_numpys():
    # The tutorials' accuracy line on a batch of two: with the values alone, the unpacking
    # succeeded and `predicted` held the second row's largest logit, not the classes.
    logits = tf.tensor(np.array([[0.1, 2.0, 0.3], [1.5, 0.2, 0.1]], np.float32), requires_grad=True)
    _, predicted = logits.max(1)
    assert predicted.data.tolist() == [1, 0]
    values, _ = logits.max(1)
    values.sum().backward()
    assert logits.grad.tolist() == [[0, 1, 0], [1, 0, 0]]
    assert np.array_equal(tf.ops.max(tf.tensor(X), 1).data, X.max(1))  # the op: NumPy's axis
    with pytest.raises(TypeError, match="got dim 1 twice"):
        tf.tensor(X).max(1, dim=1)
    with pytest.raises(TypeError, match="got keepdim twice"):
        tf.tensor(X).min(1, True, keepdim=True)
    with pytest.raises(TypeError, match="takes dim and keepdim"):
        tf.tensor(X).max(1, True, 2)


def test_size_is_the_count_and_called_the_shape():
    x = tf.zeros(2, 3, 4)
    assert x.size == 24 and x.size + 1 == 25 and type(x.size + 1) is int
    assert x.size() == (2, 3, 4) and x.size(0) == 2 and x.size(-1) == 4
    b, t, c = x.size()  # nanoGPT's first line of attention
    assert (b, t, c) == (2, 3, 4) and x.dim() == 3 == x.ndim
    with pytest.raises(IndexError, match=r"size: dim 3 is out of range .* shape \(2, 3, 4\)"):
        x.size(3)


def test_pow_method_is_the_pow_op():
    x = tf.tensor([1.5, -2.0], requires_grad=True)
    y = x.pow(2)
    y.sum().backward()
    assert np.allclose(y.data, [2.25, 4.0]) and np.allclose(x.grad, [3.0, -4.0])


def test_long_clamp_and_clip_grad_norm_under_pytorchs_names():
    x = tf.tensor([1.7, -2.5], requires_grad=True)
    assert tf.long == "int64" and x.long().dtype == np.int64 and x.long().tolist() == [1, -2]
    y = x.clamp(max=0.0)
    y.sum().backward()
    assert y.tolist() == [0.0, -2.5] and x.grad.tolist() == [0.0, 1.0]
    assert tf.clamp(x, -1.0, 1.0).tolist() == [1.0, -1.0]
    layer = nn.Linear(3, 2)
    (layer(tf.ones(4, 3)) ** 2).sum().backward()
    norm = nn.utils.clip_grad_norm_(layer.parameters(), 0.5)
    clipped = math.sqrt(sum((p.grad.astype(np.float64) ** 2).sum() for p in layer.parameters()))
    assert norm > 0.5 and clipped == pytest.approx(0.5, rel=1e-4)


def test_softmax_modules_take_dim():
    x = tf.tensor(X)
    assert np.array_equal(nn.Softmax(dim=1)(x).data, F.softmax(x, 1).data)
    log_softmax = nn.LogSoftmax(dim=-1)
    assert repr(log_softmax) == "LogSoftmax(axis=-1)"
    assert np.allclose(log_softmax(x).data, np.log(F.softmax(x, -1).data), atol=1e-6)


def test_nanogpt_attention_as_written_equals_sdpa():
    """nanoGPT's CausalSelfAttention.forward (the manual path), line for line."""
    tf.manual_seed(0)
    n_head, B, T, C = 2, 2, 5, 8
    qkv = tf.randn(B, T, 3 * C)
    bias = tf.tril(tf.ones(T, T)).view(1, 1, T, T)
    q, k, v = qkv.split(C, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
    assert np.allclose(y.data, want.data, atol=1e-6)


def test_multinomial_is_seeded_and_draws_in_proportion():
    weights = tf.tensor([1.0, 2.0, 0.0, 7.0])  # need not sum to 1
    tf.manual_seed(3)
    a = tf.multinomial(weights, 20_000, replacement=True)
    tf.manual_seed(3)
    assert np.array_equal(tf.multinomial(weights, 20_000, replacement=True).data, a.data)
    assert a.shape == (20_000,) and a.dtype == np.int64
    share = np.bincount(a.data, minlength=4) / 20_000
    assert share[2] == 0 and np.allclose(share, [0.1, 0.2, 0.0, 0.7], atol=0.015)


def test_multinomial_without_replacement_draws_distinct_in_sequential_order():
    tf.manual_seed(0)
    picks = tf.multinomial(tf.tensor([[1.0, 2.0, 0.0, 7.0]] * 20_000), 2).data  # (rows, 2)
    assert picks.shape == (20_000, 2) and (picks[:, 0] != picks[:, 1]).all()
    assert not (picks == 2).any()  # weight 0: never drawn
    # Drawing one, removing it, drawing again: P(second = 0) = 0.2 * 1/8 + 0.7 * 1/3, ...
    second = np.bincount(picks[:, 1], minlength=4) / 20_000
    want = [0.2 / 8 + 0.7 / 3, 0.1 * 2 / 9 + 0.7 * 2 / 3, 0.0, 0.1 * 7 / 9 + 0.2 * 7 / 8]
    assert np.allclose(second, want, atol=0.015)
    first = np.bincount(picks[:, 0], minlength=4) / 20_000
    assert np.allclose(first, [0.1, 0.2, 0.0, 0.7], atol=0.015)


def test_nanogpt_sampling_step_as_written():
    tf.manual_seed(0)
    idx = tf.zeros(3, 1, dtype=np.int64)
    logits = tf.randn(3, 65)
    probs = F.softmax(logits, dim=-1)
    idx_next = tf.multinomial(probs, num_samples=1)
    idx = tf.cat((idx, idx_next), dim=1)
    assert idx.shape == (3, 2) and idx.dtype == np.int64 and (idx.data[:, 1] < 65).all()


@pytest.mark.parametrize(
    "weights, num_samples, error",
    [
        ([[0.5, 0.5, 0.0]], 3, "cannot draw 3 distinct samples from a row with only 2 positive"),
        ([-1.0, 2.0], 1, "the weights must be finite and >= 0"),
        ([1.0, np.nan], 1, "the weights must be finite and >= 0"),
        ([[1.0, 1.0], [0.0, 0.0]], 1, "row 1 of the weights sums to 0"),
        (np.ones((2, 2, 2)), 1, r"input must be 1-D or 2-D weights, got \(2, 2, 2\)"),
        ([1.0, 1.0], 0, "num_samples must be at least 1, got 0"),
    ],
)
def test_multinomial_refuses_bad_weights_naming_the_problem(weights, num_samples, error):
    with pytest.raises(ValueError, match=f"multinomial: {error}"):
        tf.multinomial(weights, num_samples)


class _LastDraw:
    """A generator whose uniform draws are all the largest double below 1."""

    def random(self, size):
        return np.full(size, 1 - 2.0**-53)


def test_categorical_never_draws_a_weight_of_zero_at_the_top_of_the_cdf():
    # Seven shares of 1/7 add up to 0.9999999999999998 in floating point: the largest uniform
    # draw fell past that CDF, and clipping it (as generate's sampler did) picked the last
    # category, whose weight is 0.
    weights = np.array([[1.0] * 7 + [0.0]])
    shares = weights / weights.sum()
    assert shares.cumsum()[-1] < 1 - 2.0**-53  # the trap is there
    assert random.categorical(shares, 1, _LastDraw())[0, 0] == 6
    assert random.categorical(weights, 1, _LastDraw())[0, 0] == 6


def test_topk_values_indices_and_gradient():
    x = tf.tensor([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, -1.0, 4.0]], requires_grad=True)
    values, indices = tf.topk(x, 2)  # unpacks as torch.topk's result
    assert values.tolist() == [[3.0, 3.0], [5.0, 4.0]] and indices.tolist() == [[0, 2], [1, 3]]
    assert indices.dtype == np.int64 and not indices.requires_grad  # ties: earlier first
    (values * tf.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 4.0]]
    smallest = x.topk(1, dim=0, largest=False)
    assert smallest.values.tolist() == [[0.0, 1.0, -1.0, 2.0]] and smallest.indices.shape == (1, 4)
    with pytest.raises(tf.OpError, match=r"topk: k must be an integer in \[0, 4\] .* got 5"):
        tf.topk(x, 5)
    with pytest.raises(tf.OpError, match=r"topk: axis 2 is out of range .* \(2, 4\)"):
        tf.topk(x, 1, axis=2)


def test_nanogpt_top_k_filter_without_item_assignment():
    logits = tf.tensor([[0.5, 2.0, -1.0, 1.0]])
    v, _ = tf.topk(logits, min(2, logits.size(-1)))
    # nanoGPT writes logits[logits < v[:, [-1]]] = -inf; tinyformer tensors take no assignment
    logits = logits.masked_fill(logits < v[:, [-1]], float("-inf"))
    assert F.softmax(logits, dim=-1).numpy()[0, [0, 2]].tolist() == [0.0, 0.0]


def test_tensor_methods_by_pytorchs_names_compute_what_numpy_would():
    a = np.arange(6.0).reshape(2, 3)
    x = tf.tensor(a, requires_grad=True)
    tiled = x.repeat(2, 1, 2)  # an extra leading axis, as in PyTorch
    np.testing.assert_array_equal(tiled.data, np.tile(a, (2, 1, 2)))
    (tiled * tiled).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * a * 4)  # four copies of each element
    assert [u.data.tolist() for u in x.unbind(dim=1)] == [[0, 3], [1, 4], [2, 5]]
    np.testing.assert_array_equal(x.flip(0, 1).data, a[::-1, ::-1])
    np.testing.assert_array_equal(x.t().data, a.T)
    assert x.new_zeros(4, 1).shape == (4, 1) and x.new_ones((2,), dtype=np.int64).dtype == np.int64
    assert x.gt(2).data.tolist() == [[False, False, False], [True, True, True]]
    assert x.ge(2).any(dim=1).data.tolist() == [True, True] and not x.le(4).all().item()
    with pytest.raises(ValueError, match=r"repeat: needs a size for each of the 2 axes"):
        x.repeat(2)
    with pytest.raises(ValueError, match=r"t: expects a tensor of at most 2 axes"):
        tf.zeros(2, 2, 2).t()
    with pytest.raises(IndexError, match=r"unbind: dim 2 is out of range for shape \(2, 3\)"):
        x.unbind(2)
