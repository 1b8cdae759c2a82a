"""The WordPiece tokenizer: BERT's basic tokenization, greedy sub-words, special tokens,
truncation and padding; and (optional) equality with Hugging Face's BertTokenizer."""

import random
import string

import numpy as np
import pytest

from tinyformer.data import tokenizer_from_dict
from tinyformer.data.text import pydoc_topics
from tinyformer.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer, basic_tokenize

VOCAB = [*SPECIAL_TOKENS, "un", "##aff", "##able", "the", "cat", "sat", ".", ",", "!", "hello",
         "world", "cafe", "日", "本", "a", "##b", "##c", "b", "c"]  # fmt: skip


@pytest.fixture
def tok():
    return WordPieceTokenizer(VOCAB)


def test_basic_tokenization_lowercases_strips_accents_splits_punctuation_and_cjk():
    assert basic_tokenize("Hello, World!") == ["hello", ",", "world", "!"]
    assert basic_tokenize("Café NAÏVE résumé") == ["cafe", "naive", "resume"]
    # kana are not CJK ideographs, and accent stripping removes the voicing mark of "で"
    assert basic_tokenize("日本語です") == ["日", "本", "語", "てす"]
    assert basic_tokenize("a\x00b\ufffdc\x07d\te\u00a0f") == ["abcd", "e", "f"]
    assert basic_tokenize("x$y^z`w") == ["x", "$", "y", "^", "z", "`", "w"]  # ASCII symbols
    assert basic_tokenize("Café", lowercase=False) == ["Café"]
    assert basic_tokenize("   ") == []


def test_greedy_longest_match_first(tok):
    assert tok.tokenize("unaffable") == ["un", "##aff", "##able"]
    assert tok.tokenize("abc") == ["a", "##b", "##c"]
    assert tok.tokenize("cats") == ["[UNK]"]  # "cat" then no "##s": the whole word is unknown
    assert tok.tokenize("a" + "b" * 100) == ["[UNK]"]  # over 100 characters
    assert tok.tokenize("the [MASK] sat.") == ["the", "[MASK]", "sat", "."]


def test_encode_pairs_truncation_and_batches(tok):
    cls, sep = tok.cls_id, tok.sep_id
    the, cat, sat = (tok.vocab[w] for w in ("the", "cat", "sat"))
    assert tok.encode("the cat") == [cls, the, cat, sep]
    assert tok.encode("the cat", "sat") == [cls, the, cat, sep, sat, sep]
    # longest first: the longer sentence loses tokens from its end; ties trim the second
    assert tok.encode("the cat sat the", "sat", max_length=6) == [cls, the, cat, sep, sat, sep]
    assert tok.encode("the", "cat sat", max_length=5) == [cls, the, sep, cat, sep]
    with pytest.raises(ValueError, match="max_length 2"):
        tok.encode("the", "cat", max_length=2)
    batch = tok(["the cat", "hello"], ["sat", "world ! !"])
    ids, mask, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    assert ids.shape == mask.shape == types.shape == (2, 7)
    assert ids[0].tolist() == [cls, the, cat, sep, sat, sep, tok.pad_id]
    assert mask[0].tolist() == [1, 1, 1, 1, 1, 1, 0]
    assert types[0].tolist() == [0, 0, 0, 0, 1, 1, 0]
    assert types[1].tolist() == [0, 0, 0, 1, 1, 1, 1] and mask[1].sum() == 7


def test_decode_rejoins_pieces(tok):
    assert tok.decode(tok.encode("unaffable cat, hello!")) == "unaffable cat, hello!"
    assert tok.decode(tok.encode("the cat"), skip_special_tokens=False) == "[CLS] the cat [SEP]"
    with pytest.raises(ValueError, match="WordPieceTokenizer.decode: token -1 is outside"):
        tok.decode([5, -1])


def test_vocabulary_errors_and_round_trips(tok, tmp_path):
    with pytest.raises(ValueError, match=r"lacks the special tokens \['\[MASK\]'\]"):
        WordPieceTokenizer([t for t in VOCAB if t != "[MASK]"])
    with pytest.raises(ValueError, match="repeated"):
        WordPieceTokenizer([*VOCAB, "cat"])
    tok.save_vocab(tmp_path / "vocab.txt")
    again = WordPieceTokenizer.from_file(tmp_path / "vocab.txt")
    assert again.itos == tok.itos
    assert tokenizer_from_dict(tok.to_dict()).encode("hello world") == tok.encode("hello world")


def test_a_trained_vocabulary_spells_every_word_of_its_corpus():
    text = pydoc_topics()[:20000]
    tok = WordPieceTokenizer.train(text, 500)
    assert tok.vocab_size == 500  # the text has more distinct words than that: the cap holds
    assert tok.unk_id not in tok.encode(text)
    with pytest.raises(ValueError, match="below the"):
        WordPieceTokenizer.train(text, 20)


def _samples():
    rng = random.Random(0)
    lines = [line for line in pydoc_topics().splitlines() if line.strip()]
    alphabet = string.printable + "éüñÅ日本—“”‘’…\u00a0\u200b\u0301"
    out = [
        "Hello, World! Café naïve 日本語 テスト", "unaffable [MASK] x$y^z`", "\t tab\x00 é",
        "ÅNGSTRÖM résumé", "don't stop-believing...", "a" * 120 + " b",
    ]  # fmt: skip
    out += rng.sample(lines, 200)
    out += ["".join(rng.choice(alphabet) for _ in range(60)) for _ in range(200)]
    return out


@pytest.mark.hf
def test_matches_hugging_face_bert_tokenizer(tmp_path):
    transformers = pytest.importorskip("transformers")
    tok = WordPieceTokenizer.train(pydoc_topics(), 3000)
    tok.save_vocab(tmp_path / "vocab.txt")
    reference = transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True)
    for text in _samples():
        assert tok.encode(text) == reference.encode(text), repr(text)
    pairs = tok(["the first sentence", "a"], ["and the second one, longer", "b"], max_length=8)
    ref = reference(["the first sentence", "a"], ["and the second one, longer", "b"],
                    max_length=8, truncation="longest_first", padding=True)  # fmt: skip
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        np.testing.assert_array_equal(pairs[key], np.array(ref[key]))
