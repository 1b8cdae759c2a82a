"""Corpora (offline default, checksummed download), tokenizers and batching."""

from __future__ import annotations

import hashlib
import io
import urllib.error

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyformer.data import (
    BPETokenizer,
    CharTokenizer,
    DatasetUnavailable,
    LMData,
    load_text,
    load_tokenizer,
)
from tinyformer.data import text as text_module

SMALL = "the cat sat on the mat. the cat ate the rat! 123 + 456 = 579\n\tdone_with_it"


@pytest.fixture(scope="module")
def bpe():
    return BPETokenizer.train(load_text("pydoc")[:50_000], 400)


def test_embedded_corpus_needs_no_network():
    text = load_text()
    assert len(text) > 400_000 and "assert" in text


@given(st.text())
def test_bpe_round_trips_any_unicode(bpe, s):
    assert bpe.decode(bpe.encode(s)) == s


def test_bpe_training_is_deterministic_and_compresses(bpe, tmp_path):
    corpus = load_text("pydoc")[:50_000]
    again = BPETokenizer.train(corpus, 400)
    assert again.merges == bpe.merges and bpe.vocab_size == 400
    ids = bpe.encode(corpus)
    assert len(ids) < 0.6 * len(corpus.encode("utf-8"))
    bpe.save(tmp_path / "tok.json")
    loaded = load_tokenizer(tmp_path / "tok.json")
    assert loaded.encode(corpus[:2000]) == ids[: len(loaded.encode(corpus[:2000]))]


def test_bpe_merges_follow_the_most_frequent_pair():
    tok = BPETokenizer.train("aaab aaab aaab", 257)
    assert tok.merges == [(ord("a"), ord("a"))]
    assert tok.encode("aaab") == [256, ord("a"), ord("b")]
    with pytest.raises(ValueError, match="vocab_size"):
        BPETokenizer.train("x", 100)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.decode([999])


def test_char_tokenizer_round_trip_and_unknown_characters():
    tok = CharTokenizer.train(SMALL)
    assert tok.decode(tok.encode(SMALL)) == SMALL
    with pytest.raises(ValueError, match="'Z' at position 2"):
        tok.encode("thZ")
    for bad in (tok.vocab_size, -1):  # -1 used to decode as the last character, silently
        with pytest.raises(ValueError, match=f"CharTokenizer.decode: token {bad} is outside"):
            tok.decode([0, bad])


def test_batches_are_shifted_windows_and_seeded():
    data = LMData(np.arange(1000), block_size=8, val_fraction=0.1)
    x, y = data.get_batch("train", 4, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8)
    assert np.array_equal(y, x + 1) and x.max() < 900
    vx, _ = data.get_batch("val", 4, np.random.default_rng(0))
    assert vx.min() >= 900
    again, _ = data.get_batch("train", 4, np.random.default_rng(0))
    assert np.array_equal(again, x)
    with pytest.raises(ValueError, match="fewer than block_size"):
        LMData(np.arange(50), block_size=8)


def test_local_files_and_bad_names(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("hello world", encoding="utf-8")
    assert load_text(str(path)) == "hello world"
    with pytest.raises(DatasetUnavailable, match=r"no text file no-such-corpus \(nor a corpus"):
        load_text("no-such-corpus")
    with pytest.raises(DatasetUnavailable, match="is a folder: give a text file, or a corpus"):
        load_text(str(tmp_path))


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_download_offline_says_how_to_pass_a_local_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYFORMER_CACHE", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(text_module.urllib.request, "urlopen", offline)
    with pytest.raises(DatasetUnavailable, match="pass its path"):
        load_text("tinyshakespeare")
    assert list(tmp_path.iterdir()) == []


def test_download_is_checksummed_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYFORMER_CACHE", str(tmp_path))
    payload = b"To be, or not to be\n"
    calls = []

    def fake(url, timeout):
        calls.append(url)
        return _Response(payload)

    monkeypatch.setattr(text_module.urllib.request, "urlopen", fake)
    with pytest.raises(DatasetUnavailable, match="nothing was saved"):
        load_text("tinyshakespeare")  # the real checksum does not match the payload
    assert not (tmp_path / "tinyshakespeare.txt").exists()
    monkeypatch.setattr(text_module, "TINYSHAKESPEARE_SHA256", hashlib.sha256(payload).hexdigest())
    assert load_text("tinyshakespeare") == payload.decode()
    assert load_text("tinyshakespeare") == payload.decode()
    assert len(calls) == 2  # the second load came from the cache
