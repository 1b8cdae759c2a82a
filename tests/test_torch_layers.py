"""Layers against PyTorch: for each module, PyTorch's own instance is built, its state_dict is
loaded into ours with strict=True (so every parameter and buffer name and shape is PyTorch's),
the same float64 inputs go through both, and the outputs, the input gradients and every
parameter's gradient must agree (a random upstream gradient on each output)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _load(ours: nn.Module, theirs) -> nn.Module:
    """ours.to(float64) holding theirs' state, loaded strictly."""
    ours.to(np.float64)
    ours.load_state_dict({k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()})
    return ours


def _flat(out) -> list:
    """Every tensor of a nested tuple of outputs, such as an LSTM's (out, (h, c))."""
    if isinstance(out, tuple | list):
        return [t for o in out for t in _flat(o)]
    return [out]


def compare(ours, theirs, *inputs, call=None, seed=0, constants=(), **kwargs):
    """Same inputs (float arrays get gradients, but those at the `constants` positions) through
    both modules; compare everything."""
    call = call or (lambda m, *xs, **kw: m(*xs, **kw))
    need = [a.dtype.kind == "f" and i not in constants for i, a in enumerate(inputs)]
    ours_in = [tf.Tensor(a, requires_grad=n) for a, n in zip(inputs, need, strict=True)]
    theirs_in = [torch.tensor(a, requires_grad=n) for a, n in zip(inputs, need, strict=True)]
    outs = [o for o in _flat(call(ours, *ours_in, **kwargs)) if o is not None]
    outs_t = [o for o in _flat(call(theirs, *theirs_in, **kwargs)) if o is not None]
    assert len(outs) == len(outs_t)
    for a, b in zip(outs, outs_t, strict=True):
        np.testing.assert_allclose(a.data, b.detach().numpy(), rtol=1e-9, atol=1e-11)
    rng = np.random.default_rng(seed)
    gys = [rng.standard_normal(o.shape) for o in outs]
    total = sum((o * tf.Tensor(g)).sum() for o, g in zip(outs, gys, strict=True))
    total.backward()
    total_t = sum((o * torch.from_numpy(g)).sum() for o, g in zip(outs_t, gys, strict=True))
    total_t.backward()
    for a, b in zip(ours_in, theirs_in, strict=True):
        if b.requires_grad:
            np.testing.assert_allclose(a.grad, b.grad.numpy(), rtol=1e-9, atol=1e-11)
    params = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        expected = np.zeros(p.shape) if p.grad is None else p.grad.numpy()
        got = params[name].grad
        got = np.zeros(p.shape) if got is None else got
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11, err_msg=name)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- batch norm ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, shape, kw",
    [
        ("BatchNorm1d", (5, 3), {}),
        ("BatchNorm1d", (4, 3, 6), {"momentum": None}),
        ("BatchNorm2d", (2, 3, 4, 5), {"affine": False}),
        ("BatchNorm2d", (2, 3, 4, 5), {"momentum": 0.3, "eps": 1e-3}),
        ("BatchNorm2d", (2, 3, 2, 2), {"track_running_stats": False}),
    ],
)
def test_batch_norm_trains_and_evaluates_as_pytorch(name, shape, kw):
    theirs = getattr(torch.nn, name)(3, **kw).double()
    with torch.no_grad():  # running stats and affine parameters away from their defaults
        for p in theirs.parameters():
            p.copy_(torch.from_numpy(_x(3, seed=7) * 0.3 + 1.0))
    ours = _load(getattr(nn, name)(3, **kw), theirs)
    for step in range(3):  # training steps move the running statistics
        compare(ours, theirs, _x(*shape, seed=step))
        ours.zero_grad()
        theirs.zero_grad()
    state, state_t = ours.state_dict(), theirs.state_dict()
    assert list(state) == list(state_t)
    for key, value in state_t.items():
        np.testing.assert_allclose(np.asarray(state[key].data), value.numpy(), rtol=1e-12)
    ours.eval()
    theirs.eval()
    compare(ours, theirs, _x(*shape, seed=9))


def test_batch_norm_cumulative_average_with_momentum_none():
    bn = nn.BatchNorm1d(2, momentum=None).to(np.float64)
    batches = [_x(6, 2, seed=s) for s in range(4)]
    for b in batches:
        bn(tf.Tensor(b))
    np.testing.assert_allclose(bn.running_mean, np.mean([b.mean(0) for b in batches], 0))
    np.testing.assert_allclose(bn.running_var, np.mean([b.var(0, ddof=1) for b in batches], 0))
    assert int(np.asarray(bn.num_batches_tracked)) == 4


def test_batch_norm_eval_graph_keeps_its_statistics_through_a_training_step():
    # eval saves the running mean for backward: a training step in between updates the
    # running statistics in place, and must not change what that backward computes
    bn = nn.BatchNorm1d(2).to(np.float64)
    bn(tf.Tensor(_x(8, 2, seed=4) * 2 + 1))  # running statistics away from 0 and 1
    bn.eval()
    x = tf.Tensor(_x(4, 2), requires_grad=True)
    bn(x).sum().backward()
    expected = bn.weight.grad.copy()
    bn.zero_grad()
    y = bn(x)
    bn.train()
    bn(tf.Tensor(_x(8, 2, seed=5) * 3 + 2))
    y.sum().backward()
    np.testing.assert_allclose(bn.weight.grad, expected, rtol=1e-12)


def test_batch_norm_errors_name_the_layer():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(tf.randn(3, 4, 4))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(tf.randn(1, 3))
    with pytest.raises(ValueError, match="num_features=4"):
        nn.BatchNorm1d(4)(tf.randn(2, 3))


# -- unfold, adaptive pooling, hardswish, KL divergence -----------------------------------------


@pytest.mark.parametrize(
    "kw",
    [{"kernel_size": 3}, {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": 2}],
)
def test_unfold(kw):
    compare(nn.Unfold(**kw), torch.nn.Unfold(**kw), _x(2, 3, 7, 6))
    compare(nn.Unfold(**kw), torch.nn.Unfold(**kw), _x(3, 7, 6))  # unbatched


@pytest.mark.parametrize("size", [1, 3, (2, None), (5, 4)])
def test_adaptive_avg_pool2d(size):
    compare(nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), _x(2, 3, 7, 3))


def test_hardswish_at_and_between_the_kinks():
    x = np.array([-5.0, -3.0, -2.5, -1e-3, 0.0, 1.7, 3.0, 4.2])
    compare(nn.Hardswish(), torch.nn.Hardswish(), x)


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_loss(reduction, log_target):
    logq = np.log(np.random.default_rng(1).dirichlet(np.ones(5), size=4))
    p = np.random.default_rng(2).dirichlet(np.ones(5), size=4)
    target = np.log(p) if log_target else p
    kw = {"reduction": reduction, "log_target": log_target}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's note on reduction="mean"
        compare(nn.KLDivLoss(**kw), torch.nn.KLDivLoss(**kw), logq, target)
        if not log_target:  # a zero probability adds nothing (PyTorch's target gradient is NaN
            p[0, 1] = 0.0  # there, ours 0: only the input's gradient is compared)
            compare(nn.KLDivLoss(**kw), torch.nn.KLDivLoss(**kw), logq, p, constants=(1,))


# -- recurrent layers ---------------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_rnn(nonlinearity, batch_first):
    kw = dict(num_layers=2, nonlinearity=nonlinearity, batch_first=batch_first, bidirectional=True)
    theirs = torch.nn.RNN(3, 4, **kw).double()
    ours = _load(nn.RNN(3, 4, **kw), theirs)
    x = _x(2, 5, 3) if batch_first else _x(5, 2, 3)
    compare(ours, theirs, x, _x(4, 2, 4, seed=1))
    compare(ours, theirs, x)  # h0 = zeros


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_unbatched_sequences(name):
    theirs = getattr(torch.nn, name)(3, 4, num_layers=2).double()
    ours = _load(getattr(nn, name)(3, 4, num_layers=2), theirs)
    compare(ours, theirs, _x(5, 3))


def test_rnn_cell():
    for nonlinearity in ("tanh", "relu"):
        theirs = torch.nn.RNNCell(3, 4, nonlinearity=nonlinearity).double()
        ours = _load(nn.RNNCell(3, 4, nonlinearity=nonlinearity), theirs)
        compare(ours, theirs, _x(2, 3), _x(2, 4, seed=1))


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_dropout_between_layers(name):
    """In eval, dropout changes nothing (so PyTorch's outputs match); in training it drops
    only what goes to the next layer: the last layer's outputs are never zeroed wholesale, and
    the first layer's final state does not depend on it."""
    theirs = getattr(torch.nn, name)(3, 4, num_layers=2, dropout=0.5).double().eval()
    ours = _load(getattr(nn, name)(3, 4, num_layers=2, dropout=0.5), theirs).eval()
    compare(ours, theirs, _x(5, 2, 3))
    ours.train()
    x = tf.Tensor(_x(5, 2, 3))
    tf.manual_seed(0)
    out_a, state_a = ours(x)
    tf.manual_seed(1)
    out_b, state_b = ours(x)
    h_a, h_b = (s[0] if name == "LSTM" else s for s in (state_a, state_b))
    assert not np.allclose(out_a.data, out_b.data)  # the second layer saw other masks
    np.testing.assert_array_equal(h_a.data[0], h_b.data[0])  # the first layer saw none
    with pytest.warns(UserWarning, match="num_layers=1"):
        getattr(nn, name)(3, 4, dropout=0.2)


@pytest.mark.parametrize("name", ["RNN", "GRU", "LSTM"])
def test_recurrent_errors_name_the_public_class(name):
    with pytest.raises(ValueError, match=f"^{name}: dropout should be"):
        getattr(nn, name)(3, 4, num_layers=2, dropout=1.5)
    with pytest.raises(ValueError, match=f"^{name}: input must be"):
        getattr(nn, name)(3, 4)(tf.randn(2, 5, 7))
    if name == "RNN":
        with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'gelu'"):
            nn.RNN(3, 4, nonlinearity="gelu")


# -- attention and transformers -----------------------------------------------------------------


def _masks(n, heads, lq, lk, kind):
    """(attn_mask, key_padding_mask) of one kind, PyTorch's conventions (True = masked out)."""
    rng = np.random.default_rng(3)
    pad = np.zeros((n, lk), bool)
    pad[0, lk - 2 :] = True  # the first sequence's last two keys are padding
    if kind == "none":
        return None, None
    if kind == "bool":
        return np.triu(np.ones((lq, lk), bool), 1), pad
    if kind == "float":
        return rng.standard_normal((lq, lk)), np.where(pad, -np.inf, 0.0)
    return np.triu(np.ones((n * heads, lq, lk), bool), 1 + rng.integers(0, 2)), None  # 3-D


MHA_KW = [
    {},
    {"batch_first": True},
    {"kdim": 3, "vdim": 5},
    {"bias": False},
    {"add_bias_kv": True, "add_zero_attn": True},
    {"add_zero_attn": True, "batch_first": True},
]


@pytest.mark.parametrize("masks", ["none", "bool", "float", "3d"])
@pytest.mark.parametrize("kw", MHA_KW)
def test_multihead_attention(kw, masks):
    theirs = torch.nn.MultiheadAttention(8, 2, **kw).double()
    ours = _load(nn.MultiheadAttention(8, 2, **kw), theirs)
    n, lq, lk = 3, 4, 6
    lay = (lambda t, e: (n, t, e)) if kw.get("batch_first") else (lambda t, e: (t, n, e))
    q, k, v = (
        _x(*lay(lq, 8)),
        _x(*lay(lk, kw.get("kdim", 8)), seed=1),
        _x(*lay(lk, kw.get("vdim", 8)), seed=2),
    )
    attn_mask, padding = _masks(n, 2, lq, lk, masks)

    def call(m, q, k, v):
        lib = torch.from_numpy if m is theirs else (lambda a: a)
        am, pm = (None if a is None else lib(a) for a in (attn_mask, padding))
        return m(q, k, v, key_padding_mask=pm, attn_mask=am)

    compare(ours, theirs, q, k, v, call=call)


def test_multihead_attention_self_unbatched_and_per_head_weights():
    theirs = torch.nn.MultiheadAttention(8, 4).double()
    ours = _load(nn.MultiheadAttention(8, 4), theirs)
    x = _x(5, 8)

    def call(m, x):
        return m(x, x, x, average_attn_weights=False)

    compare(ours, theirs, x, call=call)  # the weights' gradients too
    compare(ours, theirs, x, call=lambda m, x: m(x, x, x, need_weights=False))
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_multihead_attention_errors():
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    mha = nn.MultiheadAttention(8, 2)
    x = tf.randn(4, 2, 8)
    with pytest.raises(TypeError, match="nn.Attention"):
        mha(x)
    with pytest.raises(RuntimeError, match="is_causal"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match=r"attn_mask of shape \(3, 3\) should be \(4, 4\)"):
        mha(x, x, x, attn_mask=np.zeros((3, 3), bool))


def _layer_inputs(batch_first, s=5, t=4, n=2, e=8):
    lay = (lambda m: (n, m, e)) if batch_first else (lambda m: (m, n, e))
    return _x(*lay(s)), _x(*lay(t), seed=1)


LAYER_KW = [
    {},
    {"norm_first": True, "activation": "gelu", "batch_first": True},
    {"bias": False, "layer_norm_eps": 1e-3},
]


@pytest.mark.parametrize("kw", LAYER_KW)
def test_transformer_encoder_layer_and_stack(kw):
    kw = {"dim_feedforward": 16, "dropout": 0.0, **kw}
    src, _ = _layer_inputs(kw.get("batch_first", False))
    padding = np.zeros((2, 5))
    padding[1, 3:] = -np.inf  # a float padding mask, as the float src_mask
    theirs = torch.nn.TransformerEncoderLayer(8, 2, **kw).double()
    ours = _load(nn.TransformerEncoderLayer(8, 2, **kw), theirs)
    compare(ours, theirs, src)
    mask = np.triu(np.full((5, 5), -np.inf), 1)

    def call(m, x, stack=False):
        lib = torch.from_numpy if isinstance(m, torch.nn.Module) else (lambda a: a)
        masks = {"mask" if stack else "src_mask": lib(mask), "src_key_padding_mask": lib(padding)}
        return m(x, **masks)

    compare(ours, theirs, src, call=call)
    norm = torch.nn.LayerNorm(8).double()
    stack_t = torch.nn.TransformerEncoder(theirs, 2, norm, enable_nested_tensor=False)
    with torch.no_grad():  # the two copies differ, so a wrong layer order would show
        stack_t.layers[1].linear1.weight.mul_(-0.5)
    stack = _load(nn.TransformerEncoder(ours, 2, nn.LayerNorm(8)), stack_t)
    assert list(stack.state_dict()) == list(stack_t.state_dict())
    compare(stack, stack_t, src, call=call, stack=True)


@pytest.mark.parametrize("kw", LAYER_KW)
def test_transformer_decoder_layer_and_stack(kw):
    kw = {"dim_feedforward": 16, "dropout": 0.0, **kw}
    memory, tgt = _layer_inputs(kw.get("batch_first", False))
    theirs = torch.nn.TransformerDecoderLayer(8, 2, **kw).double()
    ours = _load(nn.TransformerDecoderLayer(8, 2, **kw), theirs)
    compare(ours, theirs, tgt, memory)
    tgt_mask = np.triu(np.ones((4, 4), bool), 1)
    memory_padding = np.zeros((2, 5), bool)
    memory_padding[0, 4:] = True

    def call(m, tgt, memory):
        lib = torch.from_numpy if isinstance(m, torch.nn.Module) else (lambda a: a)
        return m(tgt, memory, tgt_mask=lib(tgt_mask), memory_key_padding_mask=lib(memory_padding))

    compare(ours, theirs, tgt, memory, call=call)
    stack_t = torch.nn.TransformerDecoder(theirs, 2)
    stack = _load(nn.TransformerDecoder(ours, 2), stack_t)
    compare(stack, stack_t, tgt, memory, call=call)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")  # PyTorch's fast-path notice
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer(batch_first):
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=16,
              batch_first=batch_first)  # fmt: skip
    theirs = torch.nn.Transformer(**kw).double().eval()  # eval: dropout off in both
    ours = _load(nn.Transformer(**kw), theirs).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    src, tgt = _layer_inputs(batch_first)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(
        mask.data, torch.nn.Transformer.generate_square_subsequent_mask(4).numpy()
    )

    def call(m, src, tgt):
        if isinstance(m, torch.nn.Module):
            return m(src, tgt, tgt_mask=torch.from_numpy(mask.data.copy()))
        return m(src, tgt, tgt_mask=mask)

    compare(ours, theirs, src, tgt, call=call)


def test_transformer_stacks_are_copies_and_init_is_xavier():
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16)
    stack = nn.TransformerEncoder(layer, 3)
    weights = [m.linear1.weight for m in stack.layers]
    assert all(w is not layer.linear1.weight for w in weights)
    assert len({id(w) for w in weights}) == 3
    model = nn.Transformer(16, 2, 1, 1, 32)
    w = model.encoder.layers[0].linear1.weight.data  # xavier: U(+-sqrt(6 / (16 + 32)))
    assert np.abs(w).max() <= np.sqrt(6 / 48) and np.abs(w).max() > 0.8 * np.sqrt(6 / 48)
    with pytest.raises(RuntimeError, match="batch number"):
        model(tf.randn(3, 2, 16), tf.randn(3, 4, 16))
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")


# -- packed sequences ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_sequences_through_recurrent_layers(name, batch_first):
    """The annotated encoder-decoder's encoder: pack, a bidirectional stack, unpack."""
    kw = dict(num_layers=2, batch_first=batch_first, bidirectional=True)
    theirs = getattr(torch.nn, name)(3, 4, **kw).double()
    ours = _load(getattr(nn, name)(3, 4, **kw), theirs)
    lengths = [6, 4, 4, 1]  # sorted, as enforce_sorted=True wants
    x = _x(4, 7, 3) if batch_first else _x(7, 4, 3)

    def call(m, x):
        rnn = torch.nn.utils.rnn if isinstance(m, torch.nn.Module) else nn.utils.rnn
        packed = rnn.pack_padded_sequence(x, lengths, batch_first=batch_first)
        out, final = m(packed)
        padded, got_lengths = rnn.pad_packed_sequence(out, batch_first=batch_first)
        assert list(np.asarray(got_lengths)) == lengths
        return padded, final

    compare(ours, theirs, x, call=call)


def test_packed_sequence_fields_and_padding_helpers():
    seqs = [_x(2, 3), _x(5, 3, seed=1), _x(3, 3, seed=2)]
    ours = nn.utils.rnn.pad_sequence(
        [tf.Tensor(s) for s in seqs], batch_first=True, padding_value=-1.0
    )
    theirs = torch.nn.utils.rnn.pad_sequence(
        [torch.from_numpy(s) for s in seqs], batch_first=True, padding_value=-1.0
    )
    np.testing.assert_array_equal(ours.data, theirs.numpy())
    lengths = [2, 5, 3]
    packed = nn.utils.rnn.pack_padded_sequence(
        ours, lengths, batch_first=True, enforce_sorted=False
    )
    packed_t = torch.nn.utils.rnn.pack_padded_sequence(
        theirs, lengths, batch_first=True, enforce_sorted=False
    )
    np.testing.assert_array_equal(packed.data.data, packed_t.data.numpy())
    for field in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        np.testing.assert_array_equal(getattr(packed, field), getattr(packed_t, field).numpy())
    padded, _ = nn.utils.rnn.pad_packed_sequence(packed, padding_value=7.0, total_length=6)
    padded_t, _ = torch.nn.utils.rnn.pad_packed_sequence(
        packed_t, padding_value=7.0, total_length=6
    )
    np.testing.assert_array_equal(padded.data, padded_t.numpy())
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        nn.utils.rnn.pack_padded_sequence(ours, lengths, batch_first=True)


def test_an_unknown_recurrent_argument_names_pytorchs_base_class():
    # Python names the __init__ that refused it: PyTorch's RNNBase, not a private class
    with pytest.raises(TypeError, match=r"RNNBase.__init__\(\) got an unexpected keyword"):
        nn.LSTM(3, 4, proj_size=2)
    nn.GRU(3, 4).flatten_parameters()  # PyTorch code calls it; nothing to do here


# -- the layers in code written as tutorials write it --------------------------------------------


def _tutorial_models(torch, nn, F):
    """Models in the style of PyTorch's examples and tutorials, the same source for both
    libraries: only the three names passed in differ."""

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, max_len=64):
            super().__init__()
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(1e4) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

        def forward(self, x):
            return x + self.pe[: x.size(0), :]

    class TransformerLM(nn.Transformer):  # an encoder-only LM: the decoder is replaced
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers, dropout=0.0)  # fmt: skip
            self.pos_encoder = PositionalEncoding(ninp)
            self.input_emb = nn.Embedding(ntoken, ninp)
            self.decoder = nn.Linear(ninp, ntoken)

        def forward(self, src):
            mask = (torch.triu(torch.ones(len(src), len(src))) == 1).transpose(0, 1)
            mask = mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)
            x = self.pos_encoder(self.input_emb(src) * math.sqrt(self.d_model))
            return F.log_softmax(self.decoder(self.encoder(x, mask=mask)), dim=-1)

    class Encoder(nn.Module):  # a bidirectional GRU over padded sentences of their lengths
        def __init__(self, vocab, emb, hidden):
            super().__init__()
            self.embed = nn.Embedding(vocab, emb)
            self.rnn = nn.GRU(emb, hidden, 2, batch_first=True, bidirectional=True, dropout=0.0)

        def forward(self, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(self.embed(x), lengths, batch_first=True)
            output, final = self.rnn(packed)
            output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True)
            final = torch.cat([final[0 : final.size(0) : 2], final[1 : final.size(0) : 2]], dim=2)
            return output, final

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Hardswish(),
                nn.Conv2d(8, 8, 3, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
                nn.AdaptiveAvgPool2d((1, 1)),
            )  # fmt: skip
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(8, 5), nn.BatchNorm1d(5))

        def forward(self, x):
            return self.head(self.features(x))

    return TransformerLM, Encoder, SmallCNN


def _pair(index, *args):
    theirs = _tutorial_models(torch, torch.nn, torch.nn.functional)[index](*args).double()
    ours = _tutorial_models(tf, nn, nn.functional)[index](*args)
    return _load(ours, theirs), theirs


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")  # PyTorch's fast-path notice
def test_tutorial_transformer_language_model():
    ours, theirs = _pair(0, 20, 8, 2, 16, 2)
    tokens = np.random.default_rng(0).integers(0, 20, (6, 3))
    compare(ours, theirs, tokens)


def test_tutorial_packed_gru_encoder():
    ours, theirs = _pair(1, 20, 4, 5)
    tokens = np.random.default_rng(0).integers(0, 20, (3, 6))
    compare(ours, theirs, tokens, call=lambda m, x: m(x, [6, 4, 2]))


def test_tutorial_cnn_trains_as_pytorch_with_batch_norm_and_kl_distillation():
    """Three SGD steps in training mode on a KL-divergence distillation loss: the parameters
    and the running statistics afterwards, then an eval forward, all as PyTorch's."""
    ours, theirs = _pair(2)
    rng = np.random.default_rng(0)
    images, teacher = rng.standard_normal((4, 3, 9, 9)), rng.standard_normal((4, 5))
    opt = tf.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9)
    runs = [(ours, tf, nn, opt), (theirs, torch, torch.nn, opt_t)]
    for _ in range(3):
        for model, lib, lib_nn, optim in runs:
            x, t = (lib.tensor(a) for a in (images, teacher))
            log_p = lib_nn.functional.log_softmax(model(x) / 2.0, dim=-1)
            loss = lib_nn.KLDivLoss(reduction="batchmean")(
                log_p, lib_nn.functional.softmax(t / 2.0, dim=-1)
            )
            optim.zero_grad()
            loss.backward()
            optim.step()
    state, state_t = ours.state_dict(), theirs.state_dict()
    for key, value in state_t.items():
        np.testing.assert_allclose(np.asarray(state[key].data), value.numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=key)  # fmt: skip
    ours.eval()
    theirs.eval()
    compare(ours, theirs, images)
