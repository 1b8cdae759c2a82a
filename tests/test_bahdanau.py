"""RNNsearch (Bahdanau attention) and its parts: conv1d's receptive field, the GRU and LSTM
cells against PyTorch, the additive score, masking, greedy decoding, and the training command."""

import copy
import json

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import backend, cli, nn, registry
from tinyformer.models.bahdanau import BahdanauConfig, Memory, RNNSearch

SMALL = BahdanauConfig(src_vocab_size=11, tgt_vocab_size=9, emb=4, hidden=3, dec_hidden=5, attn=4)


def _model(config=SMALL, seed=0):
    tf.manual_seed(seed)
    return RNNSearch(config).to(np.float64).eval()


def test_conv1d_matches_the_sum_and_dilation_widens_the_receptive_field():
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 9)), rng.standard_normal((4, 3, 2)), rng.standard_normal(4)
    y = F.conv1d(tf.Tensor(x), tf.Tensor(w), tf.Tensor(b), stride=2, padding=1, dilation=3)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    expected = np.stack(
        [np.einsum("nci,oci->no", xp[:, :, [t * 2, t * 2 + 3]], w) + b for t in range(4)], -1
    )
    np.testing.assert_allclose(y.data, expected, rtol=1e-12)
    # kernel 2, dilations 1, 2, 4: the last output sees exactly the last 8 inputs
    stack = [nn.Conv1d(1, 1, 2, dilation=d, dtype=np.float64) for d in (1, 2, 4)]
    h = seq = tf.Tensor(rng.standard_normal((1, 1, 12)), requires_grad=True)
    for conv in stack:
        h = conv(h)
    h[0, 0, -1].backward()
    np.testing.assert_array_equal(seq.grad[0, 0] != 0, np.arange(12) >= 4)


@pytest.mark.parametrize("cell", [nn.GRUCell, nn.LSTMCell])
def test_cells_pass_gradcheck(cell):
    tf.manual_seed(0)
    m = cell(3, 2).to(np.float64)
    x = tf.Tensor(np.random.default_rng(0).standard_normal((2, 3)), requires_grad=True)
    h = tf.Tensor(np.random.default_rng(1).standard_normal((2, 2)), requires_grad=True)
    if cell is nn.GRUCell:
        assert tf.gradcheck(m, [x, h])
    else:
        c = tf.Tensor(np.random.default_rng(2).standard_normal((2, 2)), requires_grad=True)
        assert tf.gradcheck(lambda x, h, c: m(x, (h, c)), [x, h, c])


@pytest.mark.torch
@pytest.mark.parametrize("name", ["GRUCell", "LSTMCell", "GRU", "LSTM"])
def test_recurrent_layers_match_pytorch_with_the_same_weights(name):
    torch = pytest.importorskip("torch")
    tf.manual_seed(0)
    cell = name.endswith("Cell")
    kw = {} if cell else dict(num_layers=2, batch_first=True, bidirectional=True)
    ours = getattr(nn, name)(5, 4, **kw).to(np.float64)
    theirs = getattr(torch.nn, name)(5, 4, **kw).double()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())  # PyTorch's names, shapes
    theirs.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in ours.state_dict().items()})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5) if cell else (3, 6, 5))
    x_ours, x_theirs = tf.Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    if cell:
        y, y_t = ours(x_ours), theirs(x_theirs)
        y, y_t = (y[0], y_t[0]) if name == "LSTMCell" else (y, y_t)
    else:  # sequences of lengths 6, 3, 1: ours with lengths=, theirs packed
        lengths = np.array([6, 3, 1])
        y, _ = ours(x_ours, lengths=lengths)
        packed = torch.nn.utils.rnn.pack_padded_sequence(
            x_theirs, torch.tensor(lengths), batch_first=True, enforce_sorted=False
        )
        y_t, _ = torch.nn.utils.rnn.pad_packed_sequence(
            theirs(packed)[0], batch_first=True, total_length=6
        )
    np.testing.assert_allclose(y.data, y_t.detach().numpy(), rtol=1e-10, atol=1e-12)
    gy = rng.standard_normal(y.shape)
    (y * tf.Tensor(gy)).sum().backward()
    (y_t * torch.from_numpy(gy)).sum().backward()
    np.testing.assert_allclose(x_ours.grad, x_theirs.grad.numpy(), rtol=1e-9, atol=1e-12)
    grads = {k: p.grad.numpy() for k, p in theirs.named_parameters()}
    for k, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad, grads[k], rtol=1e-9, atol=1e-12, err_msg=k)


def test_additive_score_is_v_tanh_ws_plus_uh():
    model = _model()
    rng = np.random.default_rng(0)
    s, h = rng.standard_normal((2, 5)), rng.standard_normal((2, 7, 6))
    attn = model.attn
    e = attn.score(tf.Tensor(s), attn.Ua(tf.Tensor(h)))
    W, U, u_b, v = attn.Wa.weight.data, attn.Ua.weight.data, attn.Ua.bias.data, attn.Va.weight.data
    expected = np.array(
        [[v[0] @ np.tanh(W @ s[b] + U @ h[b, j] + u_b) for j in range(7)] for b in range(2)]
    )
    np.testing.assert_allclose(e.data, expected, rtol=1e-12)


def test_attention_weights_sum_to_one_and_padding_changes_nothing():
    model = _model()
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(3, 11, (2, 6)), rng.integers(3, 9, (2, 4))
    src[1, 4:] = 0  # the second source is 4 long
    logits, weights = model.decode(tgt, model.encode(src))
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-12)
    assert (weights.data[1, :, 4:] == 0).all()
    padded = np.concatenate([src, np.zeros((2, 3), np.int64)], axis=1)
    again, _ = model.decode(tgt, model.encode(padded))
    np.testing.assert_allclose(again.data, logits.data, rtol=1e-10, atol=1e-12)
    alone, _ = model.decode(tgt[1:], model.encode(src[1:, :4]))  # no padding at all
    np.testing.assert_allclose(alone.data[0], logits.data[1], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"row 0 is \[3, 0, 4\]"):
        model.encode(np.array([[3, 0, 4]]))


def test_decoder_step_passes_gradcheck():
    model = _model()
    rng = np.random.default_rng(0)
    y_emb = tf.Tensor(rng.standard_normal((2, 4)), requires_grad=True)
    s = tf.Tensor(rng.standard_normal((2, 5)), requires_grad=True)
    h = tf.Tensor(rng.standard_normal((2, 3, 6)), requires_grad=True)
    pad = np.array([[False, False, False], [False, False, True]])

    def step(y_emb, s, h):
        return model.step(y_emb, s, Memory(h, model.attn.Ua(h), s, pad))

    assert tf.gradcheck(step, [y_emb, s, h])


def test_greedy_feeds_back_the_argmax_and_returns_the_weights_it_used():
    model = _model(seed=3)
    src = np.random.default_rng(1).integers(3, 11, (4, 7))
    ids, weights = model.greedy(src, 6)
    out = np.ones((4, 1), np.int64)
    for _ in range(weights.shape[1]):
        logits, _ = model(src, out)
        out = np.concatenate([out, logits.data[:, -1].argmax(1)[:, None]], axis=1)
    _, teacher = model.decode(out[:, :-1], model.encode(src))
    np.testing.assert_allclose(weights, teacher.data, rtol=1e-10)
    for row, ref in zip(ids, out[:, 1:]):
        n = np.argmax(ref == 2) if (ref == 2).any() else len(ref)
        np.testing.assert_array_equal(row[:n], ref[:n])
        assert (row[n:] == 0).all()


def test_training_step_and_greedy_on_the_fake_device_give_the_hosts_numbers():
    tf.manual_seed(0)
    host = RNNSearch(SMALL)
    fake = copy.deepcopy(host).to("fake")
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(3, 11, (2, 6)), rng.integers(3, 9, (2, 4))
    src[0, 4:] = 0
    with registry.prefer(registry.REFERENCE):  # the arithmetic the fake device does
        losses = []
        for model in (host, fake):
            _, loss = model(src, tgt[:, :-1], tgt[:, 1:])
            loss.backward()
            losses.append(loss)
            assert model.greedy(src, 5)[0].shape[0] == 2
        assert losses[1].device == backend.device("fake")
        assert losses[1].item() == pytest.approx(losses[0].item(), rel=1e-6)
        for (k, p), q in zip(host.named_parameters(), fake.parameters()):
            np.testing.assert_allclose(backend.host_copy(q.grad), p.grad, rtol=1e-5, atol=1e-6,
                                       err_msg=k)  # fmt: skip
        np.testing.assert_array_equal(host.greedy(src, 5)[0], fake.greedy(src, 5)[0])


def test_train_bahdanau_command(tmp_path, capsys):
    out = tmp_path / "bd"
    flags = ["--iters", "3", "--batch-size", "8", "--test-dates", "20", "--eval-interval", "3",
             "--emb", "8", "--hidden", "8", "--dec-hidden", "8", "--attn", "8",
             "--out-dir", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(["train", "bahdanau", *flags]) == 0
    assert "held-out exact match (20 dates" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert 0.0 <= results["greedy_exact_match"] <= 1.0 and results["ms_per_step"] > 0
    assert (out / "alignment.png").stat().st_size > 0
    assert cli.main(["train", "bahdanau", "--resume", "--iters", "4", "--out-dir", str(out),
                     "--no-progress"]) == 0  # fmt: skip
    assert len(json.loads((out / "log.json").read_text())["loss"]) == 4
