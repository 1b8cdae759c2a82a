"""The BERT encoder and masked-LM data: parameter counts, BERT's masking rule (exact and
statistical), padding, post-LN vs pre-LN, a whole-model gradcheck, and the training command."""

import dataclasses
import json

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.data.mlm import mask_tokens, pad_batch
from tinyformer.data.sentences import shuffle_words, split_sentences, tamper_batch
from tinyformer.models.bert import (
    BERT_CONFIGS,
    Bert,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
)

SMALL = BertConfig(vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=8, d_ff=16,
                   dropout=0.0)  # fmt: skip
SPECIAL = (0, 1, 2, 3, 4)  # pad, unk, cls, sep, mask


def test_named_configs_have_the_papers_parameter_counts():
    # Hugging Face's BertModel (encoder + pooler) has exactly these; the paper rounds them
    assert BERT_CONFIGS["bert_base"].num_parameters() == 109_482_240  # "110M"
    assert BERT_CONFIGS["bert_large"].num_parameters() == 335_141_888  # "340M"
    for norm in ("post", "pre"):
        config = dataclasses.replace(SMALL, norm=norm)
        assert Bert(config).num_parameters() == config.num_parameters()
        assert BertForMaskedLM(config).num_parameters() == config.num_parameters(mlm_head=True)


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_head 4"):
        BertConfig(d_model=10, n_head=4)
    with pytest.raises(ValueError, match="norm must be 'post' or 'pre'"):
        BertConfig(norm="sandwich")
    with pytest.raises(ValueError, match="longer than max_position 16"):
        Bert(SMALL)(np.zeros((1, 17), np.int64))
    ids = np.ones((2, 4), np.int64)  # each below ran silently, or failed deep in attention
    with pytest.raises(
        ValueError, match=r"labels must have input_ids' shape \(2, 4\), got \(2, 3\)"
    ):
        BertForMaskedLM(SMALL)(ids, labels=np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match=r"attention_mask must have input_ids' shape \(2, 4\)"):
        Bert(SMALL)(ids, attention_mask=np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"input_ids of shape \(2, 0\) hold no tokens"):
        Bert(SMALL)(np.zeros((2, 0), np.int64))


def _batch(rng, b=400, t=30):
    ids = rng.integers(5, 40, (b, t))
    lengths = rng.integers(4, t + 1, b)
    ids[:, 0] = 2
    ids[np.arange(b), lengths - 1] = 3
    ids[np.arange(t) >= lengths[:, None]] = 0
    return ids


def test_masking_chooses_exactly_15_percent_of_real_tokens_and_labels_only_them():
    rng = np.random.default_rng(0)
    ids = _batch(rng)
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=40, special_ids=SPECIAL,
                                 rng=np.random.default_rng(1))  # fmt: skip
    chosen = labels != -100
    candidates = ~np.isin(ids, SPECIAL)
    assert not (chosen & ~candidates).any()  # never [CLS], [SEP] or padding
    expected = np.maximum(1, np.rint(0.15 * candidates.sum(1)))
    np.testing.assert_array_equal(chosen.sum(1), expected)
    np.testing.assert_array_equal(labels[chosen], ids[chosen])  # labels: the original tokens
    np.testing.assert_array_equal(inputs[~chosen], ids[~chosen])  # the rest is untouched
    again = mask_tokens(ids, mask_id=4, vocab_size=40, special_ids=SPECIAL,
                        rng=np.random.default_rng(1))  # fmt: skip
    np.testing.assert_array_equal(again[0], inputs)  # a seeded generator repeats itself
    with pytest.raises(ValueError, match=r"\(B, T\) integers"):
        mask_tokens(ids[0], mask_id=4, vocab_size=40, special_ids=SPECIAL, rng=rng)


def test_masking_follows_the_80_10_10_rule_statistically():
    rng = np.random.default_rng(2)
    ids = _batch(rng, b=3000)
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=40, special_ids=SPECIAL, rng=rng)
    chosen = labels != -100
    n = chosen.sum()
    masked = (inputs[chosen] == 4).mean()
    kept = (inputs[chosen] == ids[chosen]).mean()
    # a uniformly random replacement can draw the original token (1/40) or [MASK] (1/40)
    random = (1 - masked - kept) + 0.1 * 2 / 40
    for observed, p in ((masked, 0.8 + 0.1 / 40), (kept, 0.1 + 0.1 / 40), (random, 0.1)):
        assert abs(observed - p) < 4.5 * np.sqrt(p * (1 - p) / n), (observed, p)
    # every real position is equally likely to be chosen: compare the first and second halves
    real = ~np.isin(ids, SPECIAL)
    first = chosen[:, :15].sum() / real[:, :15].sum()
    second = chosen[:, 15:].sum() / real[:, 15:].sum()
    assert abs(first - second) < 0.01
    replaced = inputs[chosen & (inputs != 4) & (inputs != ids)]
    counts = np.bincount(replaced, minlength=40)
    assert counts[:5].sum() > 0  # drawn from the whole vocabulary, as BERT does


def test_mlm_loss_counts_only_the_chosen_positions():
    tf.manual_seed(0)
    model = BertForMaskedLM(SMALL).to(np.float64).eval()
    rng = np.random.default_rng(3)
    ids = _batch(rng, b=4, t=12)
    inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=40, special_ids=SPECIAL, rng=rng)
    mask = (ids != 0).astype(np.int64)
    logits, loss = model(inputs, labels, mask)
    full, _ = model(inputs, None, mask)  # (B, T, V)
    chosen = labels != -100
    z = full.data[chosen]  # (N, V)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    expected = np.mean(lse - z[np.arange(len(z)), labels[chosen]])
    np.testing.assert_allclose(logits.data, z, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_padding_changes_nothing_for_the_real_tokens(norm):
    tf.manual_seed(0)
    model = Bert(dataclasses.replace(SMALL, norm=norm)).to(np.float64).eval()
    ids = np.array([[2, 7, 8, 9, 3]])
    padded = np.array([[2, 7, 8, 9, 3, 0, 0, 0]])
    short = model(ids).data
    long = model(padded, attention_mask=(padded != 0).astype(int)).data
    np.testing.assert_allclose(long[:, :5], short, rtol=1e-12, atol=1e-12)
    unmasked = model(padded).data  # without the mask the padding is attended to
    assert not np.allclose(unmasked[:, :5], short)


def test_post_ln_ends_normalised_and_pre_ln_ends_with_a_final_layer_norm():
    ids = np.array([[2, 7, 8, 9, 3]])
    tf.manual_seed(0)
    post = Bert(SMALL).to(np.float64).eval()(ids).data
    np.testing.assert_allclose(post.mean(-1), 0.0, atol=1e-9)  # the last op is a LayerNorm
    np.testing.assert_allclose(post.var(-1), 1.0, rtol=1e-6)
    pre = Bert(dataclasses.replace(SMALL, norm="pre"))
    assert "ln_f.weight" in pre.state_dict() and "ln_f.weight" not in Bert(SMALL).state_dict()


def test_whole_classifier_passes_gradcheck():
    config = BertConfig(vocab_size=12, max_position=6, n_layer=1, n_head=2, d_model=4, d_ff=8,
                        dropout=0.0)  # fmt: skip
    tf.manual_seed(0)
    model = BertForSequenceClassification(config, 3).to(np.float64)
    ids, mask = pad_batch([[2, 5, 6, 3], [2, 7, 3]], pad_id=0)
    params = list(model.parameters())

    def loss(*ps):
        return model(ids, np.array([0, 2]), mask)[1]

    assert tf.gradcheck(loss, params)


def test_sentences_and_the_shuffle_task():
    text = "Intro.\n\nThe cat sat on the mat today. It was warm! x = 1 + 2 * 3 / 4 - 5 % 6.\n"
    assert split_sentences(text) == ["The cat sat on the mat today."]
    rng = np.random.default_rng(0)
    sentence = "one two three four five"
    out = shuffle_words(sentence, rng)
    assert out != sentence and sorted(out.split()) == sorted(sentence.split())
    texts, labels = tamper_batch([sentence] * 200, rng)
    assert 70 < labels.sum() < 130
    assert all((t == sentence) == (y == 0) for t, y in zip(texts, labels))
    with pytest.raises(ValueError, match="cannot reorder"):
        shuffle_words("same same same", rng)


def test_train_bert_command_runs_all_three_phases(tmp_path, capsys):
    out = tmp_path / "bert"
    flags = ["--pretrain-iters", "6", "--finetune-iters", "4", "--batch-size", "4",
             "--held-out", "40", "--eval-interval", "3", "--d-model", "16", "--d-ff", "32",
             "--n-layer", "1", "--seq-len", "24", "--out-dir", str(out),
             "--no-progress"]  # fmt: skip
    assert cli.main(["train", "bert", *flags]) == 0
    text = capsys.readouterr().out
    assert "pretrained encoder" in text and "random weights" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["finetune"]) == {"pretrained", "scratch"}
    for name in ("pretrain", "finetune-pretrained", "finetune-scratch"):
        assert (out / name / "ckpt.npz").is_file()
    assert (out / "compare.png").stat().st_size > 0
    assert cli.main(["train", "bert", "--held-out", "100000", "--out-dir", str(out)]) == 2
    assert cli.main(["params", "bert", "--config", "bert_base"]) == 0
    assert "109,482,240" in capsys.readouterr().out


def test_pretraining_text_never_contains_a_test_sentence():
    from tinyformer.train.bert import TrainBertConfig, prepare

    corpus = prepare(TrainBertConfig(held_out=60, vocab_size=800))
    stream = corpus.pretrain_ids
    for sentence in corpus.test_sentences:
        ids = np.array(corpus.tokenizer.encode(sentence, add_special_tokens=False))
        windows = np.lib.stride_tricks.sliding_window_view(stream, len(ids))
        assert not (windows == ids).all(axis=1).any(), sentence
