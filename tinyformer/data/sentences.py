"""Sentences from a corpus, and a sentence-level task made from them for fine-tuning encoders.

The task, "are these words in their written order?": half the examples are corpus sentences
as written (label 0), half are the same kind of sentence with its words in random order
(label 1). The two halves use the same words, so counting words gives nothing away: the model
has to know which orders are English, which is what masked-LM pretraining teaches; a model
trained from scratch on a couple of thousand labelled sentences has to learn it from the labels
alone. (Harder variants, one swapped or one replaced word, stay near chance for a 2-layer
encoder pretrained for a few minutes, with or without pretraining.)
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["shuffle_words", "split_runs", "split_sentences", "tamper_batch"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def split_runs(text: str, min_words: int = 5, max_words: int = 40) -> list[list[str]]:
    """Runs of consecutive prose sentences: each run is a stretch of one paragraph in which
    every sentence passes the filters of `split_sentences`, so within a run each sentence is
    followed by its true next one (a sentence that fails a filter ends the run). Duplicates are
    kept; sentence pairs for next-sentence prediction are read from these runs."""
    runs = []
    for para in re.split(r"\n\s*\n", text):
        if ">>>" in para:
            continue
        run: list[str] = []
        for sentence in _SENTENCE_END.split(" ".join(para.split())):
            words = sentence.split()
            letters = sum(c.isalpha() or c == " " for c in sentence)
            if (
                min_words <= len(words) <= max_words
                and sentence[-1] in ".!?"
                and letters > 0.8 * len(sentence)
            ):
                run.append(sentence)
            elif run:
                runs.append(run)
                run = []
        if run:
            runs.append(run)
    return runs


def split_sentences(text: str, min_words: int = 5, max_words: int = 40) -> list[str]:
    """Prose sentences of the text, unique, in order of first appearance: paragraphs with
    interpreter sessions (">>>") are skipped, and sentences that are mostly symbols (code)."""
    runs = split_runs(text, min_words, max_words)
    return list(dict.fromkeys(sentence for run in runs for sentence in run))


def shuffle_words(sentence: str, rng: np.random.Generator) -> str:
    """The sentence's words in a random order different from the written one."""
    words = sentence.split()
    for _ in range(10):  # a permutation can give the sentence back, or equal words can
        out = " ".join(words[i] for i in rng.permutation(len(words)))
        if out != sentence:
            return out
    raise ValueError(f"shuffle_words: cannot reorder {sentence!r}")


def tamper_batch(sentences: list[str], rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    """Each sentence kept (label 0) or with its words shuffled (label 1), by a fair coin."""
    labels = rng.integers(0, 2, size=len(sentences))
    texts = [shuffle_words(s, rng) if y else s for s, y in zip(sentences, labels, strict=True)]
    return texts, labels.astype(np.int64)
