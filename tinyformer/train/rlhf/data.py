"""What the steps of `tinyformer train rlhf` share: prompts, sampling, preference pairs, the
optimizer of the supervised steps, and how a policy is measured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.data import Tokenizer
from tinyformer.data.labeler import labeler_score, prompt_starts
from tinyformer.models.gpt import GPT
from tinyformer.models.rlhf import completion_logprobs
from tinyformer.optim import AdamW, WarmupCosineLR, weight_decay_groups
from tinyformer.train.rlhf.config import TrainRLHFConfig

__all__ = [
    "Pairs", "accuracy", "encode", "measure", "optimizer_for", "prompt_ids",
    "sample_completions",
]  # fmt: skip


@dataclass
class Pairs:
    """Preference pairs: token ids (N, P + L) of the preferred and the other completion, and
    the prompt each pair came from (pairs of one prompt stay on one side of a split)."""

    chosen: np.ndarray
    rejected: np.ndarray
    prompt: np.ndarray

    def split(self, held_out: float, seed: int) -> tuple[Pairs, Pairs]:
        prompts = np.unique(self.prompt)
        rng = np.random.default_rng([seed, 5])
        test = rng.choice(prompts, max(1, round(held_out * len(prompts))), replace=False)
        mask = np.isin(self.prompt, test)
        pick = lambda m: Pairs(self.chosen[m], self.rejected[m], self.prompt[m])  # noqa: E731
        return pick(~mask), pick(mask)


def accuracy(margin: np.ndarray) -> float:
    """Share of pairs whose chosen completion a model ranks higher; a tie counts half (at the
    start, when every margin is 0, that is 0.5: a coin, not "always wrong")."""
    return float((margin > 0).mean() + 0.5 * (margin == 0).mean())


def sample_completions(
    model: GPT, prompts: np.ndarray, length: int, batch: int = 128
) -> np.ndarray:
    """prompts (N, P) ids -> (N, P + length) ids, sampled at temperature 1 (the policy as it
    is: PPO's ratios and KL are of this distribution), in batches."""
    out = [model.generate(prompts[i : i + batch], length) for i in range(0, len(prompts), batch)]
    return np.concatenate(out)


def encode(tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:
    return np.array([tokenizer.encode(t) for t in texts], dtype=np.int64)  # (N, len)


def prompt_ids(cfg: TrainRLHFConfig, tokenizer: Tokenizer, text: str, n: int, salt: int):
    rng = np.random.default_rng([cfg.seed, salt])
    starts = prompt_starts(text, cfg.prompt_len, cfg.completion_len, n, rng)
    return encode(tokenizer, [text[i - cfg.prompt_len : i] for i in starts])


def optimizer_for(model: Any, lr: float, iters: int) -> tuple[AdamW, WarmupCosineLR]:
    optimizer = AdamW(weight_decay_groups(model, 0.0), lr=lr, betas=(0.9, 0.95))
    return optimizer, WarmupCosineLR(optimizer, min(20, iters), iters, 0.1)


@tf.no_grad()
def _logprobs(model: GPT, seqs: np.ndarray, prompt_len: int, batch: int = 256) -> np.ndarray:
    """log pi of every completion token: (N, T) -> (N, L) on the host, in batches."""
    model.eval()
    parts = [completion_logprobs(model(seqs[i : i + batch])[0], seqs[i : i + batch], prompt_len)
             for i in range(0, len(seqs), batch)]  # fmt: skip
    return np.concatenate([backend.to_host(p.data) for p in parts])


def measure(
    cfg: TrainRLHFConfig, policy: GPT, ref: GPT, tokenizer: Tokenizer, prompts: np.ndarray
) -> dict[str, Any]:
    """The labeler's mean score of completions sampled from `policy` on `prompts`, and the
    KL divergence KL(policy || ref) estimated on the same samples (nats per completion)."""
    tf.manual_seed(cfg.seed + 7)  # the same draws for every policy measured
    seqs = sample_completions(policy, prompts, cfg.completion_len)
    texts = [tokenizer.decode(s[cfg.prompt_len :]) for s in seqs]
    kl = _logprobs(policy, seqs, cfg.prompt_len) - _logprobs(ref, seqs, cfg.prompt_len)
    return {
        "score": float(np.mean([labeler_score(t) for t in texts])),
        "kl": float(kl.sum(axis=1).mean()),
        "samples": [tokenizer.decode(s[: cfg.prompt_len]) + "|" + t for s, t in
                    zip(seqs[:6], texts[:6])],
    }  # fmt: skip
