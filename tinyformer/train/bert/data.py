"""The data of `tinyformer train bert`: the corpus cut into pretraining text and held-out test
sentences, and the batches of its three runs (masked-LM windows, NSP sentence pairs, the
tampering task's sentences)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from tinyformer.data import load_text
from tinyformer.data.mlm import mask_tokens, pad_batch
from tinyformer.data.nsp import consecutive_pairs, nsp_examples, pack_pairs
from tinyformer.data.sentences import split_runs, split_sentences, tamper_batch
from tinyformer.data.wordpiece import WordPieceTokenizer
from tinyformer.train.bert.config import TrainBertConfig

__all__ = ["Corpus", "classify_batch", "mlm_batch", "nsp_batch", "pair_batch", "prepare"]


@dataclass
class Corpus:
    tokenizer: WordPieceTokenizer
    pretrain_ids: np.ndarray  # the corpus minus the test sentences, as one id stream
    heldout_ids: np.ndarray  # the test sentences, for the masked-LM validation loss
    train_sentences: list[str]  # for fine-tuning
    test_sentences: list[str]  # never seen in pretraining or fine-tuning
    # next-sentence prediction (empty without --nsp): (sentence, its next) pairs of the text
    nsp_train: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # no test sentence
    nsp_test: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # A: a test sentence
    nsp_pool: list[str] = dataclasses.field(default_factory=list)  # the random Bs of training
    piece_ids: dict[str, list[int]] = dataclasses.field(default_factory=dict)  # sentence -> ids


def prepare(cfg: TrainBertConfig, tokenizer: WordPieceTokenizer | None = None) -> Corpus:
    raw = text = load_text(cfg.data)
    sentences = split_sentences(text)
    if len(sentences) < 2 * cfg.held_out:
        raise ValueError(
            f"train bert: the corpus has {len(sentences)} usable sentences; "
            f"--held-out {cfg.held_out} needs at least {2 * cfg.held_out}"
        )
    order = np.random.default_rng([cfg.seed, 0]).permutation(len(sentences))
    test = [sentences[i] for i in order[: cfg.held_out]]
    train = [sentences[i] for i in order[cfg.held_out :]]
    # Pretraining must not read the test sentences. They were cut from paragraphs with their
    # line breaks made spaces, so the text is cut the same way before they are taken out
    # (WordPiece splits on any whitespace, so nothing else changes).
    text = " ".join(text.split())
    for sentence in test:
        text = text.replace(sentence, " ")
    tokenizer = tokenizer or WordPieceTokenizer.train(text, cfg.vocab_size)
    heldout = np.array([i for s in test for i in tokenizer.encode(s, add_special_tokens=False)])
    ids = np.array(tokenizer.encode(text, add_special_tokens=False))
    corpus = Corpus(tokenizer, ids, heldout, train, test)
    if cfg.nsp:
        _add_pairs(corpus, raw)
    return corpus


def _add_pairs(corpus: Corpus, text: str) -> None:
    """The NSP pairs: training pairs hold no test sentence (so pretraining still never reads
    one); a test pair starts with a test sentence, whose link to its next sentence pretraining
    never saw. The test pairs' random Bs come from the whole corpus, as their true Bs do."""
    held_out = set(corpus.test_sentences)
    pairs = consecutive_pairs(split_runs(text))
    corpus.nsp_train = [(a, b) for a, b in pairs if a not in held_out and b not in held_out]
    corpus.nsp_test = [(a, b) for a, b in pairs if a in held_out]
    train = corpus.nsp_pool = corpus.train_sentences
    if not corpus.nsp_train or len(corpus.nsp_test) < 2:
        raise ValueError(f"train bert --nsp: the corpus gives {len(corpus.nsp_train)} training "
                         f"and {len(corpus.nsp_test)} held-out sentence pairs; it needs more "
                         f"paragraphs of consecutive sentences")  # fmt: skip
    sentences = {s for pair in pairs for s in pair} | set(train) | set(corpus.test_sentences)
    encode = corpus.tokenizer.encode
    corpus.piece_ids = {s: encode(s, add_special_tokens=False) for s in sentences}


def mlm_batch(
    ids: np.ndarray, tok: WordPieceTokenizer, cfg: TrainBertConfig, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random windows of the id stream as [CLS] window [SEP], masked: (inputs, labels) (B, T)."""
    width = cfg.seq_len - 2
    starts = rng.integers(0, len(ids) - width, size=cfg.batch_size)
    windows = ids[starts[:, None] + np.arange(width)]  # (B, T - 2)
    n = cfg.batch_size
    rows = np.concatenate([np.full((n, 1), tok.cls_id), windows, np.full((n, 1), tok.sep_id)], 1)
    return mask_tokens(rows, mask_id=tok.mask_id, vocab_size=tok.vocab_size,
                       special_ids=tok.special_ids, rng=rng)  # fmt: skip


def pair_batch(
    corpus: Corpus,
    pairs: list[tuple[str, str]],
    pool: list[str],
    cfg: TrainBertConfig,
    rng: np.random.Generator,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """Sentence pairs, B the true next or (by a fair coin) random from `pool`, packed as
    [CLS] A [SEP] B [SEP]: ((ids, attention_mask, token_type_ids) (N, T), NSP labels (N,))."""
    tok = corpus.tokenizer
    firsts, seconds, nsp_labels = nsp_examples(pairs, pool, rng)
    packed = pack_pairs(
        [corpus.piece_ids[a] for a in firsts], [corpus.piece_ids[b] for b in seconds],
        cls_id=tok.cls_id, sep_id=tok.sep_id, pad_id=tok.pad_id, max_length=cfg.seq_len,
    )  # fmt: skip
    return packed, nsp_labels


def nsp_batch(
    corpus: Corpus, cfg: TrainBertConfig, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A pretraining batch under --nsp: training pairs, packed and masked as BERT's are:
    ((inputs, attention_mask, token_type_ids), (masked-LM labels, NSP labels))."""
    tok = corpus.tokenizer
    picks = rng.integers(0, len(corpus.nsp_train), size=cfg.batch_size)
    pairs = [corpus.nsp_train[i] for i in picks]
    (ids, mask, types), nsp_labels = pair_batch(corpus, pairs, corpus.nsp_pool, cfg, rng)
    inputs, labels = mask_tokens(ids, mask_id=tok.mask_id, vocab_size=tok.vocab_size,
                                 special_ids=tok.special_ids, rng=rng)  # fmt: skip
    return (inputs, mask, types), (labels, nsp_labels)


def classify_batch(
    sentences: list[str], corpus: Corpus, seq_len: int, rng: np.random.Generator
) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    tok = corpus.tokenizer
    texts, labels = tamper_batch(sentences, rng)
    ids, mask = pad_batch([tok.encode(t, max_length=seq_len) for t in texts], tok.pad_id)
    return (ids, mask), labels
