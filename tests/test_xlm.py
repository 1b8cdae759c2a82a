"""Cross-lingual masked LM: the generated languages translate each other, TLM batches restart
positions and switch languages at the translation, the language embeddings and the masked-LM
loss pass gradcheck in float64, and `tinyformer train xlm` runs end to end."""

import json

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import cli
from tinyformer.data.numerals import (
    MAX_NUMBER,
    compare_pairs,
    parse_number,
    write_number,
    write_numbers,
)
from tinyformer.data.tlm import (
    mask_first_sentence,
    pack_monolingual,
    pack_translation_pairs,
    switch_blanks,
)
from tinyformer.models.xlm import XLM, XLMConfig, XLMForMaskedLM, XLMForSequenceClassification
from tinyformer.train.state import load_run
from tinyformer.train.xlm import TrainXLMConfig, translation_retrieval
from tinyformer.train.xlm.data import pair_batch, prepare, pretrain_batch

TINY = XLMConfig(vocab_size=12, n_langs=2, max_position=6, n_layer=1, n_head=2, d_model=4,
                 d_ff=8, dropout=0.0)  # fmt: skip
SPECIAL = {"cls_id": 1, "sep_id": 2, "pad_id": 0}


def test_every_number_reads_back_the_same_in_both_languages():
    for n in range(MAX_NUMBER + 1):
        a, b = write_number(n, "a"), write_number(n, "b")
        assert parse_number(a, "a") == n == parse_number(b, "b")
    assert write_number(247, "a") == "cel cem dafa kal"  # 2 hundred 40 7
    assert write_number(247, "b") == "ny ruz sovo wor"  # the same grammar, other words
    # a sentence and its translation: the same numbers, item by item
    a, b = (
        write_numbers([98, 7, 310], "a").split(", "),
        write_numbers([98, 7, 310], "b").split(", "),
    )
    assert [parse_number(w, "a") for w in a] == [parse_number(w, "b") for w in b] == [98, 7, 310]
    with pytest.raises(ValueError, match="not a number in a"):
        parse_number("wor sovo", "a")
    with pytest.raises(ValueError, match="not a number written in a"):
        parse_number("kal dafa", "a")  # a's words in b's order


def test_the_languages_share_no_letter_and_only_the_comma_token():
    a = " " + write_numbers(range(MAX_NUMBER + 1), "a")
    b = " " + write_numbers(range(MAX_NUMBER + 1), "b")
    assert set(a) & set(b) == {" ", ","}
    data = prepare(TrainXLMConfig(test_pairs=10, train_pairs=10))
    tok = data.tokenizer
    shared = set(tok.encode(a)) & set(tok.encode(b))
    assert [tok.decode([i]) for i in shared] == [","]
    # at the default vocabulary size every word but the two zeros is one token, the same
    # token in a sentence as alone
    assert len(data.encode(247, 0)) == len(data.encode(247, 1)) == 4
    assert data.sentence([247, 5], 1) == [*data.encode(247, 1), tok.encode(",")[0],
                                          *data.encode(5, 1)]  # fmt: skip


def test_relation_labels_follow_the_rule():
    for share in (0.0, 0.5):
        pairs, labels = compare_pairs(3000, np.random.default_rng(0), near=share)
        assert pairs.min() >= 0 and pairs.max() <= MAX_NUMBER
        np.testing.assert_array_equal(labels, np.sign(pairs[:, 0] - pairs[:, 1]) + 1)
        assert np.bincount(labels).min() > 900  # the three relations equally often
        unequal = pairs[:, 0] != pairs[:, 1]
        near = np.abs(pairs[:, 0] - pairs[:, 1]) < 30
        # a uniform gap is below 30 by chance 3% of the time
        assert share < near[unequal].mean() < share + 0.1
    with pytest.raises(ValueError, match="near must be in"):
        compare_pairs(3, np.random.default_rng(0), near=1.5)


def test_translation_pairs_restart_positions_and_switch_languages():
    ids, pos, langs, mask = pack_translation_pairs(
        [[5, 6], [7]], [[8, 9, 10], [11]], [0, 1], [1, 0], **SPECIAL
    )
    np.testing.assert_array_equal(ids, [[1, 5, 6, 2, 8, 9, 10, 2], [1, 7, 2, 11, 2, 0, 0, 0]])
    np.testing.assert_array_equal(pos, [[0, 1, 2, 3, 0, 1, 2, 3], [0, 1, 2, 0, 1, 0, 0, 0]])
    np.testing.assert_array_equal(langs, [[0, 0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(mask, [[1] * 8, [1] * 5 + [0] * 3])
    ids, pos, langs, mask = pack_monolingual([[5, 6], [7]], [1, 0], **SPECIAL)
    np.testing.assert_array_equal(pos, [[0, 1, 2, 3], [0, 1, 2, 0]])
    np.testing.assert_array_equal(langs, [[1, 1, 1, 1], [0, 0, 0, 0]])


def test_tlm_batches_mask_the_first_sentence_and_mlm_batches_have_no_pairs():
    cfg = TrainXLMConfig(batch_size=64, train_pairs=10, test_pairs=10, sentence_len=2,
                         tlm_switch=0.0)  # fmt: skip
    data = prepare(cfg)
    (inputs, pos, langs, mask), labels = pretrain_batch(data, cfg, True, np.random.default_rng(0))
    pairs = slice(32, 64)  # the second half: translation pairs
    restarts = (np.diff(pos[pairs], axis=1) < 0) & (mask[pairs, 1:] == 1)
    assert (restarts.sum(1) == 1).all()  # one restart, where the translation starts
    assert ((langs[pairs] == 0) & (mask[pairs] == 1)).any(1).all()
    assert ((langs[pairs] == 1) & (mask[pairs] == 1)).any(1).all()
    chosen = labels[pairs] != -100
    first = np.cumsum(inputs[pairs] == data.sep_id, axis=1) == 0
    assert not (chosen & ~first).any()  # the translation stays whole
    assert (chosen & (langs[pairs] == 0)).any() and (chosen & (langs[pairs] == 1)).any()
    assert 0.35 < chosen.sum() / (first & (inputs[pairs] != data.cls_id)).sum() < 0.65
    assert (inputs[pairs][chosen] == data.mask_id).all()
    # a translation pair reads back as two sentences that name the same numbers
    row = np.where(labels[40] != -100, labels[40], inputs[40])  # the ids before masking
    cut = np.flatnonzero(row == data.sep_id)
    first, second = row[1 : cut[0]], row[cut[0] + 1 : cut[1]]
    la, lb = langs[40, 1], langs[40, cut[0] + 1]
    read = [data.tokenizer.decode(part).split(", ") for part in (first, second)]
    assert [parse_number(w, "ab"[la]) for w in read[0]] == [
        parse_number(w, "ab"[lb]) for w in read[1]]  # fmt: skip
    (_, pos, _, mask), labels = pretrain_batch(data, cfg, False, np.random.default_rng(0))
    assert not ((np.diff(pos, axis=1) < 0) & (mask[:, 1:] == 1)).any()
    assert ((labels != -100).sum(1) >= 1).all()


@pytest.mark.parametrize("tlm", [True, False])
def test_padding_is_never_a_target(tlm):
    # a padded position labelled 0 (not -100) would teach the model to predict token 0 there
    cfg = TrainXLMConfig(batch_size=64, train_pairs=10, test_pairs=10, sentence_len=3)
    data = prepare(cfg)
    (inputs, _, _, mask), labels = pretrain_batch(data, cfg, tlm, np.random.default_rng(1))
    pad = mask == 0
    assert pad.any(1).sum() >= 8  # rows of several widths: padding to see
    assert (inputs[pad] == data.pad_id).all()
    assert (labels[pad] == -100).all()


def test_mask_first_sentence_leaves_the_translation_and_special_tokens_alone():
    ids, _, _, _ = pack_translation_pairs([[5, 6, 7, 8]], [[9, 10]], [0], [1], **SPECIAL)
    ids = np.repeat(ids, 400, axis=0)
    rng = np.random.default_rng(0)
    inputs, labels = mask_first_sentence(ids, sep_id=2, mask_id=3, special_ids=(0, 1, 2, 3),
                                         rng=rng, mlm_probability=0.5)  # fmt: skip
    np.testing.assert_array_equal(inputs[:, 5:], ids[:, 5:])  # [SEP] 9 10 [SEP]
    assert (inputs[:, 0] == 1).all() and (labels[:, [0, 5, 6, 7, 8]] == -100).all()
    chosen = labels != -100
    np.testing.assert_array_equal(inputs[chosen], 3)  # all [MASK]
    np.testing.assert_array_equal(labels[chosen], ids[chosen])
    np.testing.assert_array_equal(inputs[~chosen], ids[~chosen])
    # each word on its own: about half, and some rows lose all four words, some none
    counts = np.bincount(chosen.sum(1), minlength=5)
    assert 0.45 < chosen[:, 1:5].mean() < 0.55 and counts[0] > 5 and counts[4] > 5
    with pytest.raises(ValueError, match="mlm_probability must be in"):
        mask_first_sentence(ids, sep_id=2, mask_id=3, special_ids=(0, 1, 2, 3),
                            rng=np.random.default_rng(0), mlm_probability=0.0)  # fmt: skip


def test_switched_blanks_hold_the_translations_word_at_their_place():
    # two rows of equal lengths (the second in the other direction), one of unequal lengths
    first, second = [[5, 6, 7], [8, 9], [5, 6]], [[10, 11, 12], [4, 3], [10]]
    ids, _, _, _ = pack_translation_pairs(first, second, [0, 1, 0], [1, 0, 1], **SPECIAL)
    ids = np.repeat(ids, 200, axis=0)
    special = (0, 1, 2, 99)
    masked, labels = mask_first_sentence(ids, sep_id=2, mask_id=99, special_ids=special,
                                         rng=np.random.default_rng(0))  # fmt: skip
    every = switch_blanks(masked, labels, sep_id=2, rng=np.random.default_rng(1), probability=1)
    blank = labels != -100
    np.testing.assert_array_equal(every[:200][blank[:200]], ids[:200, 5:8][blank[:200, 1:4]])
    np.testing.assert_array_equal(every[200:400, 1:3][blank[200:400, 1:3]],
                                  ids[200:400, 4:6][blank[200:400, 1:3]])  # fmt: skip
    np.testing.assert_array_equal(every[400:], masked[400:])  # lengths differ: left masked
    np.testing.assert_array_equal(every[~blank], masked[~blank])  # only blanks change
    some = switch_blanks(masked, labels, sep_id=2, rng=np.random.default_rng(1), probability=0.2)
    switched = (some != 99) & blank
    assert 0.15 < switched[:400].sum() / blank[:400].sum() < 0.25
    none = switch_blanks(masked, labels, sep_id=2, rng=np.random.default_rng(1), probability=0)
    np.testing.assert_array_equal(none, masked)
    with pytest.raises(ValueError, match=r"probability must be in \[0, 1\], got 1.5"):
        switch_blanks(masked, labels, sep_id=2, rng=np.random.default_rng(0), probability=1.5)


class _Lookup:
    """A stand-in encoder: each token's vector from `table`, times one per position (a sum
    would give 112 and 211 the same mean)."""

    def __init__(self, table: np.ndarray, rng: np.random.Generator) -> None:
        self.table, self.pos = table, rng.normal(size=(64, table.shape[1]))

    def __call__(self, ids, langs, positions, mask):
        return tf.Tensor(self.table[ids] * self.pos[positions])


def test_translation_retrieval_finds_translations_only_when_they_align():
    data = prepare(TrainXLMConfig(train_pairs=10, test_pairs=10))
    rng = np.random.default_rng(0)
    table = rng.normal(size=(data.vocab_size, 16))
    # every word of B gets the vector of its translation in A (the grammar is the same, and
    # every word but zero is one token)
    for n in range(1, MAX_NUMBER + 1):
        table[data.encode(n, 1)] = table[data.encode(n, 0)]
    assert translation_retrieval(_Lookup(table, rng), data) > 0.99
    shuffled = table.copy()
    b_words = sorted({i for n in range(1000) for i in data.encode(n, 1)})
    shuffled[b_words] = rng.normal(size=(len(b_words), 16))
    assert translation_retrieval(_Lookup(shuffled, rng), data) < 0.05


def test_embedding_with_language_and_restarted_positions_passes_gradcheck():
    tf.manual_seed(0)
    model = XLM(TINY).to(np.float64)
    ids, pos, langs, _ = pack_translation_pairs([[5, 6]], [[7, 8, 9]], [0], [1], **SPECIAL)
    x = model.embed(ids, langs, pos).data
    w = {n: p.data for n, p in model.named_parameters()}
    expected = w["tok_emb.weight"][ids] + w["pos_emb.weight"][pos] + w["lang_emb.weight"][langs]
    np.testing.assert_allclose(x, expected, rtol=1e-12)
    tables = [model.tok_emb.weight, model.pos_emb.weight, model.lang_emb.weight]
    assert tf.gradcheck(lambda *_: model.embed(ids, langs, pos), tables)
    # the language embedding changes what the encoder computes
    other = model.eval()(ids, 1 - langs, pos).data
    assert not np.allclose(model(ids, langs, pos).data, other)


def test_tlm_loss_masking_passes_gradcheck_and_counts_only_labelled_positions():
    tf.manual_seed(0)
    model = XLMForMaskedLM(TINY).to(np.float64).eval()
    ids, pos, langs, mask = pack_translation_pairs(
        [[5, 6], [7]], [[8, 9, 10], [11]], [0, 1], [1, 0], **SPECIAL
    )
    labels = np.full(ids.shape, -100)
    labels[0, 1], labels[0, 5], labels[1, 3] = 5, 9, 11  # both sides of a pair
    logits, loss = model(ids, langs, labels, pos, mask)
    full, _ = model(ids, langs, None, pos, mask)  # (B, T, V)
    z = full.data[labels != -100]
    lse = np.log(np.exp(z).sum(1))
    np.testing.assert_allclose(logits.data, z, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), np.mean(lse - z[np.arange(3), [5, 9, 11]]))
    # the tables the picked rows come from, and the tied output matrix's bias
    xlm = model.xlm
    params = [xlm.tok_emb.weight, xlm.pos_emb.weight, xlm.lang_emb.weight, model.mlm_bias]
    assert tf.gradcheck(lambda *_: model(ids, langs, labels, pos, mask)[1], params)
    with pytest.raises(ValueError, match="labels mark no position"):
        model(ids, langs, np.full(ids.shape, -100), pos, mask)


def test_classifier_reads_pairs_in_either_language_and_checks_inputs():
    cfg = TrainXLMConfig(train_pairs=10, test_pairs=10)
    data = prepare(cfg)
    model = XLMForSequenceClassification(cfg.model_config(data.vocab_size)).eval()
    for lang in (0, 1):
        ids, pos, langs, mask = pair_batch(data, data.test[0], lang)
        assert (langs == lang).all()
        logits, loss = model(ids, langs, data.test[1], pos, mask)
        assert logits.shape == (10, 3) and np.isfinite(loss.item())
    with pytest.raises(ValueError, match=r"langs must be in \[0, 2\), got values from 3 to 3"):
        model(ids, langs + 2, None, pos, mask)
    with pytest.raises(ValueError, match=r"positions must have input_ids' shape"):
        model(ids, langs, None, pos[:, :2], mask)
    # mean pooling: the mean of the real tokens' last-layer vectors, padding left out
    mean = XLMForSequenceClassification(cfg.model_config(data.vocab_size), 3, "mean").eval()
    ids, pos, langs, mask = pair_batch(data, data.test[0][:3], 1)
    hidden = mean.xlm(ids, langs, pos, mask).data
    want = [hidden[i, mask[i] == 1].mean(0) for i in range(3)]
    np.testing.assert_allclose(mean.features(ids, langs, pos, mask).data, want, rtol=1e-5)
    logits, _ = mean(ids, langs, None, pos, mask)
    np.testing.assert_array_equal(
        logits.data, mean.classify(mean.features(ids, langs, pos, mask))[0].data
    )
    with pytest.raises(ValueError, match="pooling must be 'cls' or 'mean', got 'max'"):
        XLMForSequenceClassification(cfg.model_config(data.vocab_size), 3, "max")
    with pytest.raises(ValueError, match="d_model 10 is not divisible by n_head 4"):
        XLMConfig(d_model=10, n_head=4)


def test_train_xlm_command_runs_every_run(tmp_path, capsys):
    out = tmp_path / "xlm"
    flags = ["--pretrain-iters", "3", "--finetune-iters", "2", "--finetune-seeds", "2",
             "--batch-size", "4", "--train-pairs", "20", "--test-pairs", "12",
             "--eval-interval", "10", "--d-model", "8", "--d-ff", "16", "--n-layer", "1",
             "--n-head", "2", "--sentence-len", "2", "--out-dir", str(out),
             "--no-progress"]  # fmt: skip
    assert cli.main(["train", "xlm", *flags]) == 0
    text = capsys.readouterr().out
    assert "zero-shot in B" in text and "MLM + TLM" in text and "translation retrieval" in text
    results = json.loads((out / "results.json").read_text())
    assert set(results["finetune"]) == {"tlm", "mlm", "scratch"}
    tlm = results["finetune"]["tlm"]
    assert len(tlm["runs"]) == 2
    assert tlm["acc_b"] == pytest.approx(np.mean([r["acc_b"] for r in tlm["runs"]]))
    assert 0 <= results["pretrain"]["tlm"]["retrieval"] <= 1
    runs = [f"finetune-{name}-{k}" for name in ("tlm", "mlm", "scratch") for k in (1, 2)]
    for name in ("pretrain-tlm", "pretrain-mlm", *runs):
        assert (out / name / "ckpt.npz").is_file() and (out / name / "log.json").is_file()
    assert (out / "compare.png").stat().st_size > 0
    # fine-tuning started from the pretrained encoder, and left its frozen tables alone
    pre, _ = load_run(out / "pretrain-tlm" / "ckpt.npz")
    tuned, _ = load_run(out / "finetune-tlm-2" / "ckpt.npz")
    for name in ("tok_emb", "pos_emb", "lang_emb"):
        np.testing.assert_array_equal(tuned[f"xlm.{name}.weight"], pre[f"xlm.{name}.weight"])
    assert not np.array_equal(tuned["xlm.pooler.weight"], pre["xlm.pooler.weight"])
    # the two runs from one encoder differ (seeds), the same run from two encoders starts alike
    first, _ = load_run(out / "finetune-tlm-1" / "ckpt.npz")
    assert not np.array_equal(first["classifier.weight"], tuned["classifier.weight"])
    # a second run would replace the first: refused, exit 2
    assert cli.main(["train", "xlm", *flags]) == 2
    assert "already holds a run" in capsys.readouterr().err
    for bad in (["--batch-size", "1"], ["--tlm-mask", "0"], ["--finetune-seeds", "0"],
                ["--near", "-0.1"], ["--tlm-switch", "1.5"]):  # fmt: skip
        assert cli.main(["train", "xlm", *bad, "--out-dir", str(tmp_path / "b")]) == 2
        err = capsys.readouterr().err
        assert bad[0] in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="--pooling must be one of mean, cls, got 'max'"):
        TrainXLMConfig(pooling="max")  # the command line's choices check it there


def test_resume_without_a_run_names_the_missing_checkpoint(tmp_path, capsys):
    # it used to train a new run from scratch, as if --resume had not been given
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["train", "xlm", "--resume", "--out-dir", str(empty), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"no checkpoint at {empty / 'pretrain-tlm' / 'ckpt.npz'}" in err, err
    assert list(empty.iterdir()) == []
