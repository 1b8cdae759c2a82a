"""The GPT model: parameter counts, causality, generation, learning, and a whole-model gradcheck."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf
from tinyformer.data import CharTokenizer, LMData, load_text
from tinyformer.models import GPT, GPT_CONFIGS, GPTConfig
from tinyformer.optim import AdamW

TINY = GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16)


def _model(config=TINY, seed=0):
    tf.manual_seed(seed)
    return GPT(config)


def test_parameter_counts():
    assert GPT_CONFIGS["gpt2"].num_parameters() == 124_439_808  # nanoGPT's count, wpe included
    for config in (GPT_CONFIGS["baby"], TINY):
        assert GPT(config).num_parameters() == config.num_parameters()
    model = _model()
    assert model.lm_head.weight is model.wte.weight


def test_config_and_input_errors():
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="longer than the block size 16"):
        _model()(np.zeros((1, 17), np.int64))
    # both failed inside NumPy or attention, without naming GPT or the shapes
    with pytest.raises(ValueError, match=r"targets must have idx's shape \(1, 4\), got \(1, 3\)"):
        _model()(np.zeros((1, 4), np.int64), np.zeros((1, 3), np.int64))
    with pytest.raises(ValueError, match=r"idx of shape \(1, 0\) holds no tokens"):
        _model().generate(np.zeros((1, 0), np.int64), 2)


def test_future_tokens_do_not_change_earlier_logits():
    model = _model()
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 11, (2, 12))
    logits, _ = model(idx)
    changed = idx.copy()
    changed[:, 7:] = rng.integers(0, 11, (2, 5))
    logits2, _ = model(changed)
    np.testing.assert_allclose(logits2.data[:, :7], logits.data[:, :7], rtol=1e-5, atol=1e-6)
    assert not np.allclose(logits2.data[:, 7:], logits.data[:, 7:])


def test_generate_shapes_determinism_and_filters():
    model = _model()
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    tf.manual_seed(5)
    a = model.generate(prompt, 20)  # runs past the block size: the context is cropped
    tf.manual_seed(5)
    b = model.generate(prompt, 20)
    assert a.shape == (2, 23) and np.array_equal(a, b) and np.array_equal(a[:, :3], prompt)
    greedy = model.generate(prompt, 5, top_k=1)
    assert np.array_equal(model.generate(prompt, 5, top_p=1e-9), greedy)
    logits, _ = model(greedy[:, :-1])
    assert np.array_equal(greedy[:, -1], logits.data[:, -1].argmax(-1))
    with pytest.raises(ValueError, match="temperature"):
        model.generate(prompt, 1, temperature=0)
    with pytest.raises(ValueError, match="generate: top_k must be >= 1 .*, got -3"):
        model.generate(prompt, 1, top_k=-3)  # was taken as top_k=1 (greedy), silently
    with pytest.raises(ValueError, match="generate: max_new_tokens must be >= 0, got -1"):
        model.generate(prompt, -1)
    with pytest.raises(ValueError, match=r"generate: top_p must be in \(0, 1\], got 2"):
        model.generate(prompt, 1, top_p=2)
    tf.manual_seed(6)
    whole = model.generate(prompt, 5, top_k=10**6)  # more than the vocabulary: no filtering
    tf.manual_seed(6)
    assert np.array_equal(whole, model.generate(prompt, 5))


def test_overfits_one_batch():
    model = _model()
    idx = np.random.default_rng(1).integers(0, 11, (4, 16))
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    for _ in range(300):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05


def test_loss_drops_on_the_embedded_corpus():
    text = load_text()[:100_000]
    tok = CharTokenizer.train(text)
    config = GPTConfig(block_size=32, vocab_size=tok.vocab_size, n_layer=2, n_head=2, n_embd=32)
    model, data = _model(config), LMData(np.array(tok.encode(text)), 32)
    opt, rng = AdamW(model.parameters(), lr=3e-3), np.random.default_rng(0)
    losses = []
    for _ in range(40):
        _, loss = model(*data.get_batch("train", 8, rng))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 4.0 and np.mean(losses[-5:]) < 3.3


def test_state_dict_round_trip_gives_the_same_logits():
    a, b = _model(seed=0), _model(seed=1)
    idx = np.arange(10).reshape(1, 10)
    assert not np.allclose(a(idx)[0].data, b(idx)[0].data)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(idx)[0].data, b(idx)[0].data)


def test_one_layer_width_8_gpt_passes_gradcheck_on_all_parameters():
    config = GPTConfig(block_size=6, vocab_size=7, n_layer=1, n_head=2, n_embd=8)
    model = _model(config).to(np.float64)
    idx = np.random.default_rng(0).integers(0, 7, (2, 6))
    params = list(model.parameters())
    assert len(params) == 16  # wte, wpe, 12 in the block, ln_f weight and bias

    def loss(*ps):
        return model(idx[:, :-1], idx[:, 1:])[1]

    assert tf.gradcheck(loss, params)
