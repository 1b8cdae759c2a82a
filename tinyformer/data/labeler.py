"""The "human" of the RLHF lecture: a labeler whose rule the student can read.

The labeler likes text about Python: it scores a completion by how many *different* words of
`WORDS` it uses as whole words (case-insensitive). It prefers the completion with the higher
score, and has no preference between equal scores (those pairs are not labelled). Because the
rule is known, preference data costs nothing to make and every model can be measured by the
labeler's true score, not only by the reward model that imitates it.

Counting distinct words makes the rule harder to game than a count of occurrences: a policy
that learns to repeat one word ("list list list list") scores 1. A reward model fitted to
ordinary samples, which almost never repeat a word, has never seen that difference; pushed
without a KL penalty, the policy finds such blind spots (reward hacking).

Prompts are windows of the corpus that end at a space, so that a completion starts a word.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["WORDS", "demonstrations", "labeler_score", "prefer", "prompt_starts"]

WORDS = frozenset(
    {"class", "code", "function", "list", "method", "module", "name", "object", "return",
     "string", "type", "value"}
)  # fmt: skip
_WORD = re.compile(r"[a-z]+")


def labeler_score(completion: str) -> int:
    """How many different words of WORDS the completion uses as whole words."""
    return len(WORDS.intersection(_WORD.findall(completion.lower())))


def prefer(a: list[str], b: list[str]) -> np.ndarray:
    """The labeler's verdict on pairs of completions: +1 where a[i] is preferred, -1 where
    b[i] is, 0 where it has no preference (equal scores)."""
    return np.sign([labeler_score(x) - labeler_score(y) for x, y in zip(a, b)]).astype(np.int64)


def prompt_starts(
    text: str, prompt_len: int, completion_len: int, n: int, rng: np.random.Generator
) -> np.ndarray:
    """n positions i in text where a prompt text[i - prompt_len : i] ends at a space, with room
    for a completion of completion_len after it."""
    candidates = np.flatnonzero(np.frombuffer(text.encode("latin-1", "replace"), np.uint8) == 32)
    candidates = candidates[
        (candidates + 1 >= prompt_len) & (candidates + 1 + completion_len <= len(text))
    ]
    if len(candidates) == 0:
        raise ValueError(f"prompt_starts: the text ({len(text)} characters) has no prompt window")
    return rng.choice(candidates, n) + 1


def demonstrations(
    text: str,
    prompt_len: int,
    completion_len: int,
    n: int,
    rng: np.random.Generator,
    min_score: int = 1,
) -> list[str]:
    """n windows of prompt_len + completion_len characters of text whose completion the
    labeler scores at least min_score: the human-written demonstrations that SFT imitates."""
    found: list[str] = []
    for _ in range(200):  # batches of candidates; the loop ends long before on real text
        for i in prompt_starts(text, prompt_len, completion_len, 4 * n, rng):
            window = text[i - prompt_len : i + completion_len]
            if labeler_score(window[prompt_len:]) >= min_score:
                found.append(window)
                if len(found) == n:
                    return found
    raise ValueError(
        f"demonstrations: found only {len(found)} of {n} windows scoring >= {min_score}"
    )
