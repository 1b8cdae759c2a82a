"""nn.Module bookkeeping, the layers, and multi-head attention against a plain NumPy version."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 4)
        self.body = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 4))
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.emb.weight  # tied
        self.register_buffer("mask", np.tril(np.ones((3, 3), bool)))
        self.register_buffer("scratch", np.zeros(2), persistent=False)

    def forward(self, idx):
        return self.head(self.body(self.emb(idx)))


def test_parameters_are_registered_with_dotted_names_and_shared_ones_once():
    model = Tiny()
    names = [n for n, _ in model.named_parameters()]
    assert names == [
        "emb.weight", "body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
    ]  # fmt: skip
    assert model.num_parameters() == 5 * 4 + 6 * 4 + 6 + 4 * 6 + 4
    state = model.state_dict()
    assert "head.weight" in state and "mask" in state and "scratch" not in state
    assert np.array_equal(state["head.weight"], state["emb.weight"])


def test_load_state_dict_round_trips_and_names_every_problem():
    a, b = Tiny(), Tiny()
    b.load_state_dict(a.state_dict())
    idx = np.array([[0, 1, 4]])
    assert np.array_equal(a(idx).data, b(idx).data)

    before = {k: v.numpy().copy() for k, v in b.state_dict().items()}  # values share b's memory
    bad = a.state_dict()
    del bad["body.0.bias"]
    bad["extra.weight"] = np.zeros(1)
    bad["body.2.weight"] = np.zeros((3, 3))
    with pytest.raises(nn.StateDictError) as err:
        b.load_state_dict(bad)
    message = str(err.value)
    assert "missing keys: body.0.bias" in message and "unexpected keys: extra.weight" in message
    assert "body.2.weight" in message and "(3, 3)" in message and "(4, 6)" in message
    for key, value in b.state_dict().items():  # nothing was half-loaded
        assert np.array_equal(value, before[key])
    # non-strict tolerates missing and unexpected keys, never a wrong shape
    bad["body.2.weight"] = a.state_dict()["body.2.weight"]
    b.load_state_dict(bad, strict=False)


def test_train_eval_zero_grad_apply_and_to():
    model = Tiny()
    assert model.training and model.body[0].training
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    model(np.array([[1, 2]])).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen[-1] == "Tiny" and len(seen) == len(list(model.modules()))
    model.to(np.float64)
    assert all(p.dtype == np.float64 for p in model.parameters())
    assert model.head.weight is model.emb.weight
    with pytest.raises(TypeError, match="Tiny.to: dtype must be floating, got int32"):
        model.to(np.int32)
    with pytest.raises(TypeError, match="Tiny.to: takes a device .* or a floating dtype .*'cpux'"):
        model.to("cpux")  # was NumPy's "data type 'cpux' not understood"
    weight = model.head.weight
    assert model.to("cpu") is model and model.head.weight is weight  # PyTorch code's .to(device)
    assert all(p.dtype == np.float64 for p in model.parameters())  # nothing converted
    assert "Linear(in_features=4, out_features=6, bias=True)" in repr(model)


def test_assigning_before_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="super\\(\\).__init__"):
        Broken()


def test_containers_register_their_children():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    table = nn.ModuleDict({"a": nn.Linear(2, 3), "b": nn.LayerNorm(3)})
    assert len(list(layers.parameters())) == 6 and len(layers) == 3
    assert [n for n, _ in table.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    assert "a" in table and isinstance(table["b"], nn.LayerNorm)
    # Anything else is refused: it would have been kept as a plain attribute, out of forward
    # and parameters(), silently (nn.Sequential(nn.Linear(2, 2), F.relu) ran without the relu).
    for make in (
        lambda: nn.Sequential(nn.Linear(2, 2), F.relu),
        lambda: nn.ModuleList([nn.Linear(2, 2)]).append(3),
        lambda: nn.ModuleDict({"a": [nn.Linear(2, 2)]}),
    ):
        with pytest.raises(
            TypeError, match=r"child '(1|a)' must be a Module, got (function|int|list)$"
        ):
            make()


def test_layers_are_their_functional_ops():
    tf.manual_seed(0)
    x = tf.randn(3, 4)
    lin, ln, drop = nn.Linear(4, 2), nn.LayerNorm(4), nn.Dropout(0.5)
    np.testing.assert_allclose(lin(x).data, x.data @ lin.weight.data.T + lin.bias.data, rtol=1e-6)
    np.testing.assert_allclose(ln(x).data, F.layer_norm(x, 4, ln.weight, ln.bias).data)
    assert drop.eval()(x) is x
    emb = nn.Embedding(7, 3, padding_idx=0)
    assert np.all(emb.weight.data[0] == 0)
    emb = nn.Embedding(7, 3, padding_idx=-1)  # from the end, as in PyTorch
    assert emb.padding_idx == 6 and np.all(emb.weight.data[6] == 0)


@pytest.mark.parametrize(
    "make, message",
    [  # NumPy's errors named no layer; a padding_idx past the table was an IndexError
        (lambda: nn.Linear(-1, 3), "Linear: in_features must be a whole number >= 0, got -1"),
        (lambda: nn.Linear(4, 2.5), "Linear: out_features must be a whole number >= 0, got 2.5"),
        (lambda: nn.Embedding(5, -3), "Embedding: embedding_dim must be a whole number >= 0"),
        (lambda: nn.Embedding(5, 3, padding_idx=7), "padding_idx 7 is outside the table of 5"),
    ],
)
def test_layer_sizes_are_checked_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _numpy_mha(x, c_attn_w, c_attn_b, proj_w, proj_b, nh, causal, pad):
    b, t, c = x.shape
    q, k, v = np.split(x @ c_attn_w.T + c_attn_b, 3, axis=-1)
    heads = [a.reshape(b, t, nh, c // nh).transpose(0, 2, 1, 3) for a in (q, k, v)]
    s = heads[0] @ heads[1].transpose(0, 1, 3, 2) / np.sqrt(c // nh)
    if causal:
        s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    if pad is not None:
        s = np.where(pad[:, None, None, :], -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    y = (p @ heads[2]).transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ proj_w.T + proj_b, p


@pytest.mark.parametrize("causal, padded", [(True, False), (False, True)])
def test_multihead_attention_matches_numpy(causal, padded):
    tf.manual_seed(1)
    mha = nn.Attention(8, 2).to(np.float64)
    x = tf.randn(2, 5, 8, dtype=np.float64)
    pad = np.array([[False] * 5, [False] * 3 + [True] * 2]) if padded else None
    y, w = mha(x, is_causal=causal, key_padding_mask=pad, need_weights=True)
    want_y, want_w = _numpy_mha(
        x.data, mha.c_attn.weight.data, mha.c_attn.bias.data, mha.c_proj.weight.data,
        mha.c_proj.bias.data, 2, causal, pad,
    )  # fmt: skip
    np.testing.assert_allclose(y.data, want_y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.data, want_w, rtol=1e-10, atol=1e-12)


def test_padded_keys_do_not_change_the_output():
    tf.manual_seed(2)
    mha = nn.Attention(8, 2, cross=True)
    x, ctx = tf.randn(1, 3, 8), tf.randn(1, 6, 8)
    pad = np.array([[False] * 4 + [True] * 2])
    y = mha(x, ctx, key_padding_mask=pad).data
    ctx.data[:, 4:] = 100.0  # garbage where the keys are padding
    np.testing.assert_allclose(mha(x, ctx, key_padding_mask=pad).data, y, rtol=1e-6)


def test_blocks_pass_gradcheck():
    tf.manual_seed(3)
    block = nn.Block(8, 2, cross_attention=True).to(np.float64)
    x, ctx = tf.randn(2, 3, 8, dtype=np.float64), tf.randn(2, 4, 8, dtype=np.float64)
    params = list(block.parameters())

    def f(*ps):
        return (block(x, ctx, is_causal=True) ** 2).sum()

    assert tf.gradcheck(f, params, upstream="random")


def test_attention_module_errors_name_the_problem():
    with pytest.raises(ValueError, match="not divisible"):
        nn.Attention(10, 3)
    with pytest.raises(ValueError, match="context"):
        nn.Attention(8, 2, cross=True)(tf.randn(1, 2, 8))
    with pytest.raises(ValueError, match="key_padding_mask"):
        nn.Attention(8, 2)(tf.randn(1, 2, 8), key_padding_mask=np.zeros((1, 2)))
    with pytest.raises(ValueError, match=r"x must be \(B, T, C\), got shape \(2, 8\)"):
        nn.Attention(8, 2)(tf.randn(2, 8))  # was "not enough values to unpack"


def test_loss_modules_and_softmax_are_their_functional_ops():
    tf.manual_seed(0)
    logits, target = tf.randn(5, 4), tf.tensor([0, 3, 1, 1, -100])
    criterion = nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.1)
    expected = F.cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.1)
    assert criterion(logits, target).item() == expected.item()
    assert (
        repr(criterion)
        == "CrossEntropyLoss(ignore_index=-100, reduction='mean', label_smoothing=0.1)"
    )
    # Class weights: PyTorch's first argument, kept as a buffer (so state_dict saves them).
    w = np.array([1.0, 2.0, 0.5, 1.5], np.float32)
    weighted = nn.CrossEntropyLoss(w, label_smoothing=0.1)
    expected = F.cross_entropy(logits, target, w, label_smoothing=0.1)
    assert weighted(logits, target).item() == expected.item() != criterion(logits, target).item()
    np.testing.assert_array_equal(weighted.state_dict()["weight"], w)
    assert "weight" not in criterion.state_dict()
    lp = F.log_softmax(logits, axis=1)
    assert nn.NLLLoss(w)(lp, target).item() == F.nll_loss(lp, target, w).item()
    pred, goal = tf.randn(3, 2, requires_grad=True), tf.randn(3, 2)
    loss = nn.MSELoss()(pred, goal)
    assert loss.item() == pytest.approx(float(((pred.data - goal.data) ** 2).mean()))
    loss.backward()
    np.testing.assert_allclose(pred.grad, 2 * (pred.data - goal.data) / 6, rtol=1e-6)
    assert nn.MSELoss("none")(pred, goal).shape == (3, 2)
    np.testing.assert_array_equal(nn.Softmax(axis=0)(pred).data, F.softmax(pred, 0).data)
    np.testing.assert_array_equal(nn.Sigmoid()(pred).data, F.sigmoid(pred).data)


def test_mse_loss_and_one_hot_refuse_what_pytorch_would_misread():
    with pytest.raises(tf.OpError, match=r"mse_loss: input \(4, 1\) and target \(4,\) must have"):
        F.mse_loss(tf.zeros(4, 1), tf.zeros(4))  # PyTorch broadcasts to (4, 4), with a warning
    with pytest.raises(tf.OpError, match="mse_loss: reduction must be mean, sum or none"):
        F.mse_loss(tf.zeros(2), tf.zeros(2), reduction="avg")
    pred = tf.zeros(3, requires_grad=True)
    F.mse_loss(pred, tf.tensor([1, 2, 3])).backward()  # integer targets: data, in pred's dtype
    np.testing.assert_allclose(pred.grad, [-2 / 3, -4 / 3, -2.0], rtol=1e-6)
    with pytest.raises(tf.OpError, match="mse_loss: input is float32 and target float64; both"):
        F.mse_loss(pred, tf.zeros(3, dtype=np.float64, requires_grad=True))
    assert F.one_hot(tf.tensor([2, 0]), 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    assert F.one_hot(np.array([[1], [3]])).shape == (2, 1, 4)  # num_classes from the max
    with pytest.raises(tf.OpError, match=r"one_hot: index 3 does not fit num_classes=3 \(valid"):
        F.one_hot(tf.tensor([3]), 3)
    with pytest.raises(tf.OpError, match="one_hot: indices must be >= 0, got -1"):
        F.one_hot(tf.tensor([-1, 2]))
    with pytest.raises(tf.OpError, match="one_hot: indices must be integers, got float32"):
        F.one_hot(tf.tensor([1.0]))
