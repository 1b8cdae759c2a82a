"""Next-sentence prediction and token classification: pair construction (the 50/50 split, the
segments and [SEP]s, a random B that is never the true next), the heads' shapes and gradients,
and `tinyformer train bert --nsp`."""

import copy
import json

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import backend, cli, registry
from tinyformer.data.nsp import IS_NEXT, NOT_NEXT, consecutive_pairs, nsp_examples, pack_pairs
from tinyformer.data.sentences import split_runs, split_sentences
from tinyformer.data.wordpiece import WordPieceTokenizer
from tinyformer.models.bert import (
    Bert,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForTokenClassification,
)

TINY = BertConfig(vocab_size=12, max_position=8, n_layer=1, n_head=2, d_model=4, d_ff=8,
                  dropout=0.0)  # fmt: skip
SMALL = BertConfig(vocab_size=40, max_position=16, n_layer=2, n_head=2, d_model=8, d_ff=16,
                   dropout=0.0)  # fmt: skip
CLS, SEP, PAD = 2, 3, 0


def test_runs_keep_only_truly_consecutive_sentences():
    text = (
        "The first sentence is here now. The second one follows it. X = 1 + 2 * 3 / 4 - 5.\n"
        "The fourth comes after code. The fifth closes the paragraph.\n\n"
        "A new paragraph starts right here. It has a second sentence too.\n\n"
        ">>> print('a session is skipped entirely, sentences and all.')\n"
    )
    runs = split_runs(text)
    assert runs == [
        ["The first sentence is here now.", "The second one follows it."],
        ["The fourth comes after code.", "The fifth closes the paragraph."],
        ["A new paragraph starts right here.", "It has a second sentence too."],
    ]  # the code sentence broke the first paragraph's run: 2 -> 4 is not a true pair
    assert split_sentences(text) == [s for run in runs for s in run]
    assert consecutive_pairs(runs) == [tuple(run) for run in runs]


def test_pairs_are_half_true_next_and_a_random_b_is_never_the_true_next():
    # few distinct sentences, so that a careless draw would hit A or its next often
    pool = [f"sentence {i}" for i in range(4)]
    pairs = [(pool[i], pool[(i + 1) % 4]) for i in range(4)] * 500
    firsts, seconds, labels = nsp_examples(pairs, pool, np.random.default_rng(0))
    assert labels.dtype == np.int64 and set(np.unique(labels)) == {IS_NEXT, NOT_NEXT}
    assert abs(labels.mean() - 0.5) < 4 * np.sqrt(0.25 / len(labels))
    for (a, b_true), first, second, label in zip(pairs, firsts, seconds, labels):
        assert first == a
        if label == IS_NEXT:
            assert second == b_true
        else:
            assert second not in (a, b_true) and second in pool
    with pytest.raises(ValueError, match="needs 3 distinct sentences, got 2"):
        nsp_examples(pairs, pool[:2], np.random.default_rng(0))


def test_packing_places_segments_and_separators():
    a, b = [[10, 11, 12], [20]], [[30, 31], [40, 41, 42, 43]]
    ids, mask, types = pack_pairs(a, b, cls_id=CLS, sep_id=SEP, pad_id=PAD, max_length=16)
    np.testing.assert_array_equal(
        ids, [[2, 10, 11, 12, 3, 30, 31, 3], [2, 20, 3, 40, 41, 42, 43, 3]]
    )
    np.testing.assert_array_equal(types, [[0, 0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]])
    assert mask.all()
    # padding: mask 0 and segment 0; [SEP] ends each segment; [CLS] opens segment 0
    ids, mask, types = pack_pairs([[10], [20, 21, 22, 23]], [[30], [40, 41]], cls_id=CLS,
                                  sep_id=SEP, pad_id=PAD, max_length=16)  # fmt: skip
    np.testing.assert_array_equal(ids[0], [2, 10, 3, 30, 3, 0, 0, 0, 0])
    np.testing.assert_array_equal(mask[0], [1, 1, 1, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(types[0], [0, 0, 0, 1, 1, 0, 0, 0, 0])
    for row, m, t in zip(ids, mask, types):
        seps = np.flatnonzero(row == SEP)
        assert len(seps) == 2 and row[0] == CLS
        assert (t[: seps[0] + 1] == 0).all() and (t[seps[0] + 1 : seps[1] + 1] == 1).all()
        assert seps[1] == m.sum() - 1  # the second [SEP] is the last real token


def test_packing_truncates_longest_first_as_the_tokenizer_does():
    text = "the cat sat on the mat and the dog sat on the log while it rained"
    tok = WordPieceTokenizer.train(text * 3, vocab_size=60)
    a, b = "the cat sat on the mat and the dog sat", "on the log while it rained"
    expected = tok([a], [b], max_length=11)
    ids, mask, types = pack_pairs(
        [tok.encode(a, add_special_tokens=False)], [tok.encode(b, add_special_tokens=False)],
        cls_id=tok.cls_id, sep_id=tok.sep_id, pad_id=tok.pad_id, max_length=11,
    )  # fmt: skip
    assert ids.shape == (1, 11)
    np.testing.assert_array_equal(ids, expected["input_ids"])
    np.testing.assert_array_equal(types, expected["token_type_ids"])
    np.testing.assert_array_equal(mask, expected["attention_mask"])
    with pytest.raises(ValueError, match="max_length must be at least 5, got 4"):
        pack_pairs([[1]], [[1]], cls_id=CLS, sep_id=SEP, pad_id=PAD, max_length=4)


def test_segment_embeddings_change_the_encoding():
    tf.manual_seed(0)
    model = Bert(SMALL).to(np.float64).eval()
    ids = np.array([[2, 7, 8, 3, 9, 10, 3]])
    types = np.array([[0, 0, 0, 0, 1, 1, 1]])
    with_types, without = model(ids, token_type_ids=types).data, model(ids).data
    assert not np.allclose(with_types[:, 4:], without[:, 4:])  # segment B's tokens differ


def test_pretraining_heads_shapes_and_loss_is_the_sum_of_both():
    tf.manual_seed(0)
    model = BertForPreTraining(SMALL).to(np.float64).eval()
    ids, mask, types = pack_pairs([[7, 8, 9], [10]], [[11, 12], [13, 14]], cls_id=CLS,
                                  sep_id=SEP, pad_id=PAD, max_length=16)  # fmt: skip
    (mlm, nsp), loss = model(ids, None, mask, types)
    assert mlm.shape == (2, 8, 40) and nsp.shape == (2, 2) and loss is None
    labels = np.full(ids.shape, -100)
    labels[0, 2], labels[1, 4] = 8, 13
    nsp_labels = np.array([IS_NEXT, NOT_NEXT])
    (mlm, nsp), loss = model(ids, labels, mask, types, nsp_labels)
    assert mlm.shape == (2, 40)  # only the labelled positions
    _, mlm_loss = model(ids, labels, mask, types)
    _, nsp_loss = model(ids, None, mask, types, nsp_labels)
    z = nsp.data
    expected_nsp = np.mean(np.log(np.exp(z).sum(1)) - z[[0, 1], nsp_labels])
    np.testing.assert_allclose(nsp_loss.item(), expected_nsp, rtol=1e-12)
    np.testing.assert_allclose(loss.item(), mlm_loss.item() + nsp_loss.item(), rtol=1e-12)
    # the masked-LM part is BertForMaskedLM's, with the same weights
    mlm_only = BertForMaskedLM(SMALL).to(np.float64).eval()
    mlm_only.load_state_dict({k: v for k, v in model.state_dict().items() if "nsp" not in k})
    np.testing.assert_allclose(mlm_only(ids, labels, mask, types)[1].item(), mlm_loss.item(),
                               rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match=r"next_sentence_label must be \(2,\), got \(3,\)"):
        model(ids, None, mask, types, np.zeros(3, np.int64))


def test_pretraining_model_passes_gradcheck():
    tf.manual_seed(0)
    model = BertForPreTraining(TINY).to(np.float64)
    ids, mask, types = pack_pairs([[5, 6], [7]], [[8], [9, 10]], cls_id=CLS, sep_id=SEP,
                                  pad_id=PAD, max_length=8)  # fmt: skip
    labels = np.full(ids.shape, -100)
    labels[0, 1], labels[1, 3] = 6, 9
    params = list(model.parameters())

    def loss(*ps):
        return model(ids, labels, mask, types, np.array([0, 1]))[1]

    assert tf.gradcheck(loss, params)


def test_token_classification_shapes_padding_and_gradcheck():
    tf.manual_seed(0)
    model = BertForTokenClassification(TINY, num_labels=3).to(np.float64)
    ids = np.array([[2, 5, 6, 3], [2, 7, 3, 0]])
    mask = (ids != 0).astype(np.int64)
    labels = np.array([[-100, 1, 2, -100], [-100, 0, -100, 2]])  # the padding's 2 must not count
    logits, loss = model(ids, labels, mask)
    assert logits.shape == (2, 4, 3)
    z = logits.data
    keep = [(0, 1), (0, 2), (1, 1)]
    rows = np.array([z[i, j] for i, j in keep])
    targets = np.array([labels[i, j] for i, j in keep])
    expected = np.mean(np.log(np.exp(rows).sum(1)) - rows[np.arange(3), targets])
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)
    assert model(ids)[1] is None
    with pytest.raises(ValueError, match=r"labels must have input_ids' shape \(2, 4\)"):
        model(ids, labels[:, :3], mask)
    params = list(model.parameters())
    assert tf.gradcheck(lambda *ps: model(ids, labels, mask)[1], params)


@pytest.mark.parametrize("head", ["pretraining", "tokens"])
def test_heads_run_on_the_fake_device_as_on_the_host(head):
    ids, mask, types = pack_pairs([[5, 6], [7]], [[8], [9, 10]], cls_id=CLS, sep_id=SEP,
                                  pad_id=PAD, max_length=8)  # fmt: skip
    labels = np.where(mask == 1, ids % 3, -100)
    tf.manual_seed(0)
    if head == "pretraining":
        host = BertForPreTraining(TINY)
        inputs = (ids, np.where(ids > 6, ids, -100), mask, types, np.array([0, 1]))
    else:
        host = BertForTokenClassification(TINY, num_labels=3)
        inputs = (ids, labels, mask, types)
    fake = copy.deepcopy(host).to("fake")
    losses = []
    for model in (fake, host):
        with registry.prefer(registry.REFERENCE):  # the arithmetic the fake device does
            _, loss = model(*inputs)
            loss.backward()
        losses.append(loss.item())
    last = fake.classifier if head == "tokens" else fake.nsp_head
    assert backend.device_of(last.weight.grad).type == "fake"  # it really ran there
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    for (name, p), q in zip(fake.named_parameters(), host.parameters()):
        assert (p.grad is None) == (q.grad is None), name  # the pooler, for token tagging
        if q.grad is not None:
            np.testing.assert_allclose(backend.host_copy(p.grad), q.grad, rtol=1e-5, atol=1e-7,
                                       err_msg=name)  # fmt: skip


def _corpus(path, rng):
    """Paragraphs of made-up sentences: a small corpus builds its vocabulary in no time."""
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "theta", "zeta"]
    paragraphs = [
        " ".join(" ".join(rng.choice(words, 6)).capitalize() + "." for _ in range(4))
        for _ in range(40)
    ]
    path.write_text("\n\n".join(paragraphs))
    return str(path)


def test_train_bert_nsp_logs_held_out_nsp_accuracy(tmp_path, capsys):
    out = tmp_path / "bert"
    data = _corpus(tmp_path / "corpus.txt", np.random.default_rng(0))
    flags = ["--nsp", "--data", data, "--pretrain-iters", "4", "--finetune-iters", "1",
             "--batch-size", "4", "--held-out", "40", "--eval-interval", "4", "--d-model", "16",
             "--d-ff", "32", "--n-layer", "1", "--seq-len", "24", "--vocab-size", "100",
             "--out-dir", str(out), "--no-progress"]  # fmt: skip
    assert cli.main(["train", "bert", *flags]) == 0
    text = capsys.readouterr().out
    assert "nsp_val_acc" in text and "next-sentence prediction: held-out pairs" in text
    log = json.loads((out / "pretrain" / "log.json").read_text())
    assert [e["iter"] for e in log["evals"]] == [0, 4]
    for e in log["evals"]:
        assert 0.0 <= e["nsp_val_acc"] <= 1.0 and 0.0 <= e["nsp_train_acc"] <= 1.0
        assert e["nsp_val"] > 0 and e["nsp_train"] > 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["nsp"] and "nsp_val_acc" in results["pretrain"]
    assert (out / "compare.png").stat().st_size > 0
    # a run pretrained with --nsp has an NSP head: resuming it without --nsp is refused
    assert cli.main(["train", "bert", *flags[1:], "--resume"]) == 2
    assert "pretrained with --nsp: resume it with --nsp" in capsys.readouterr().err
