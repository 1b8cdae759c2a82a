"""The encoder-decoder Transformer: positions, masks, label smoothing, greedy and beam search,
the date task, and the training command."""

import dataclasses
import datetime as dt
import json
import math

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.data.dates import FORMATS, DateTask, render_date
from tinyformer.models.seq2seq import Seq2SeqConfig, Transformer, sinusoidal_positions
from tinyformer.train.seq2seq.plots import cross_attention

SMALL = Seq2SeqConfig(src_vocab_size=11, tgt_vocab_size=9, max_len=12, n_encoder_layers=2,
                      n_decoder_layers=2, n_head=2, d_model=8, d_ff=16, dropout=0.0)  # fmt: skip


def _model(config=SMALL, seed=0):
    tf.manual_seed(seed)
    return Transformer(config).to(np.float64).eval()


def test_sinusoidal_positions_are_the_papers_formula():
    pe = sinusoidal_positions(50, 16)
    for p, i in ((0, 0), (7, 3), (49, 7)):
        angle = p / 10000 ** (2 * i / 16)
        assert math.isclose(pe[p, 2 * i], math.sin(angle), abs_tol=1e-6)
        assert math.isclose(pe[p, 2 * i + 1], math.cos(angle), abs_tol=1e-6)


def test_future_target_tokens_and_source_padding_change_nothing():
    model = _model()
    rng = np.random.default_rng(0)
    src = rng.integers(3, 11, (2, 6))
    tgt = rng.integers(3, 9, (2, 5))
    base, _ = model(src, tgt)
    changed = tgt.copy()
    changed[:, 3:] = rng.integers(3, 9, (2, 2))
    after, _ = model(src, changed)
    np.testing.assert_allclose(after.data[:, :3], base.data[:, :3], rtol=1e-12)  # causal
    assert not np.allclose(after.data[:, 3:], base.data[:, 3:])
    padded = np.concatenate([src, np.zeros((2, 3), np.int64)], axis=1)
    again, _ = model(padded, tgt)
    np.testing.assert_allclose(again.data, base.data, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("variant", [{"norm": "pre"}, {"positions": "learned"}])
def test_variants_build_and_run(variant):
    model = _model(dataclasses.replace(SMALL, **variant))
    logits, loss = model(np.array([[3, 4, 5]]), np.array([[1, 3]]), np.array([[3, 2]]))
    assert logits.shape == (1, 2, 9) and np.isfinite(loss.item())
    with pytest.raises(ValueError, match="positions must be"):
        dataclasses.replace(SMALL, positions="rotary")


def test_input_errors_name_the_model_and_the_shapes():
    model, src, tgt = _model(), np.ones((2, 5), np.int64), np.ones((2, 4), np.int64)
    # each failed deep inside (a reshape in cross-attention, attention over no keys, an index
    # error), or in beam search only once its output grew past the model's max_len
    with pytest.raises(ValueError, match=r"src \(2, 5\) and tgt_in \(1, 4\) must hold the same"):
        model(src, tgt[:1])
    with pytest.raises(
        ValueError, match=r"tgt_out must have tgt_in's shape \(2, 4\), got \(2, 3\)"
    ):
        model(src, tgt, tgt[:, :3])
    for bad in (np.ones((2, 0), np.int64), np.ones(5, np.int64)):
        with pytest.raises(ValueError, match="token ids must be \\(B, t\\) with t >= 1"):
            model(bad, tgt)
    with pytest.raises(ValueError, match="max_len 13 is longer than the model's max_len 12"):
        model.greedy(src, 13)
    assert model.greedy(src, 12).shape[0] == 2  # up to max_len itself is fine


def test_label_smoothed_loss_ignores_padding_and_matches_the_formula():
    model = _model()
    src, tgt_in = np.array([[3, 4, 5, 6]]), np.array([[1, 5, 6, 0]])
    tgt_out = np.array([[5, 6, 2, 0]])  # the last position is padding
    logits, loss = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    z = logits.data[0, :3]
    logp = z - (np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1))[:, None]
    expected = np.mean(0.9 * -logp[np.arange(3), [5, 6, 2]] + 0.1 * -logp.mean(1))
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)


def _reference_greedy(model, src, steps):
    out = np.ones((len(src), 1), np.int64)
    for _ in range(steps):
        logits, _ = model(src, out)
        out = np.concatenate([out, logits.data[:, -1].argmax(1)[:, None]], axis=1)
    return out[:, 1:]


def _log_prob(model, src, seq):
    """Sum of log-probabilities of seq (up to and including EOS) under the model."""
    ends = np.argmax(seq == 2) + 1 if (seq == 2).any() else len(seq)
    seq = seq[:ends]
    logits, _ = model(src[None], np.concatenate([[1], seq[:-1]])[None])
    z = logits.data[0]
    logp = z - (np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1))[:, None]
    return logp[np.arange(len(seq)), seq].sum(), len(seq)


def test_greedy_equals_argmax_decoding_and_beam_search_scores_at_least_as_well():
    model = _model(seed=3)
    src = np.random.default_rng(1).integers(3, 11, (6, 7))
    greedy = model.greedy(src, 8)
    reference = _reference_greedy(model, src, 8)
    for row, ref in zip(greedy, reference):
        n = np.argmax(ref == 2) if (ref == 2).any() else len(ref)
        np.testing.assert_array_equal(row[:n], ref[:n])
        assert (row[n:] == 0).all()  # EOS and what follows come back as padding
    beam = model.beam_search(src, 8, beam=4, length_penalty=0.0)
    for s, g, b in zip(src, reference, beam):
        bseq = np.append(b[b != 0], 2) if len(b[b != 0]) < 8 else b
        assert _log_prob(model, s, bseq)[0] >= _log_prob(model, s, g)[0] - 1e-9
    with pytest.raises(ValueError, match="beam_search: need beam >= 1 and max_len >= 0, got 0, 8"):
        model.beam_search(src, 8, beam=0)


def test_date_task_is_disjoint_correct_and_in_vocabulary():
    task = DateTask(seed=0, test_dates=500)
    assert not set(task.train_days) & set(task.test_days)
    d = dt.date(1997, 3, 5)
    assert render_date(d, "weekday") == "wednesday, march 5, 1997"
    assert render_date(d, "ordinal") == "the 5th of march 1997"
    assert render_date(dt.date(2011, 1, 12), "ordinal_short") == "12th of jan. 2011"
    src, tgt_in, tgt_out, sources, targets = task.examples(
        np.array([d.toordinal()] * len(FORMATS)), sorted(FORMATS)
    )
    assert set(targets) == {"1997-03-05"} and src.shape[1] <= DateTask.MAX_SOURCE
    assert DateTask.TARGET.decode(tgt_out[0]) == "1997-03-05"
    np.testing.assert_array_equal(tgt_in[:, 1:], tgt_out[:, :-1])  # shifted by one
    with pytest.raises(ValueError, match="character 'Z'"):
        DateTask.SOURCE.encode("Z")


def test_cross_attention_rows_are_distributions_over_real_source_tokens():
    model = _model()
    src = np.array([[3, 4, 5, 0, 0]])
    w = cross_attention(model, src, np.array([[1, 3, 4]]))
    assert w.shape == (1, 3, 5)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    assert (w[..., 3:] == 0).all()


def test_train_seq2seq_command(tmp_path, capsys):
    out = tmp_path / "s2s"
    flags = ["--iters", "4", "--batch-size", "8", "--test-dates", "20", "--eval-interval", "2",
             "--d-model", "16", "--d-ff", "32", "--beam", "2", "--out-dir", str(out),
             "--no-progress"]  # fmt: skip
    assert cli.main(["train", "seq2seq", *flags]) == 0
    assert "held-out exact match (20 dates" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert 0.0 <= results["greedy_exact_match"] <= 1.0 and results["beam"] == 2
    assert (out / "alignment.png").stat().st_size > 0
    assert cli.main(["train", "seq2seq", "--resume", "--iters", "6", "--out-dir", str(out),
                     "--no-progress"]) == 0  # fmt: skip
    log = json.loads((out / "log.json").read_text())
    assert len(log["loss"]) == 6
