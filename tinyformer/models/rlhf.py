"""The two heads RLHF puts on a GPT: a reward model and a policy with a value function.

References: Ouyang et al., "Training language models to follow instructions with human
feedback" (InstructGPT, 2022): a reward model is the language model with its unembedding
replaced by a scalar head, read at the last token; PPO's value function is a second head on
the policy's own trunk (as in Hugging Face trl's `AutoModelForCausalLMWithValueHead`, whose
`v_head` name this file keeps; the reward head is named `score` as in transformers'
`GPT2ForSequenceClassification`).

Shapes: B batch, T = P + L tokens (P prompt, L completion), C width, V vocabulary.

    RewardModel:      idx (B, T) -> GPT trunk (B, T, C) -> last token (B, C) -> score (B,)
    PolicyWithValue:  idx (B, T) -> GPT trunk (B, T, C) -> lm_head logits (B, T, V)
                                                       -> v_head values (B, T)
    completion_logprobs: logits (B, T, V), idx (B, T) -> log pi(token | before) of the L
                         completion tokens (B, L)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tinyformer.nn.functional as F
from tinyformer import nn
from tinyformer.models._inputs import to_device_of
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.nn import init
from tinyformer.ops import gather, reshape, squeeze, sum
from tinyformer.tensor import Tensor

__all__ = [
    "HeadConfig",
    "PolicyWithValue",
    "RewardModel",
    "completion_logprobs",
    "sequence_logprob",
]


@dataclass(frozen=True)
class HeadConfig:
    gpt: GPTConfig  # the trunk: the pretrained (or SFT) GPT the head sits on
    head_std: float = 0.0  # init std of the scalar head's weights (0: every score starts at 0)


class RewardModel(nn.Module):
    """r(prompt + completion): a scalar per sequence, read at its last token (every completion
    here has the same length, so the last token is the end of every one)."""

    def __init__(self, config: HeadConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = GPT(config.gpt)
        self.score = nn.Linear(config.gpt.n_embd, 1)
        _init_head(self.score, config.head_std)

    def forward(self, idx: Any) -> Tensor:
        h = self.transformer.hidden(idx)  # (B, T, C)
        b, t, c = h.shape
        last = reshape(h[:, t - 1 : t, :], b, c)  # (B, C)
        return squeeze(self.score(last), -1)  # (B, 1) -> (B,)


class PolicyWithValue(nn.Module):
    """A GPT policy and its value function V(state) on the same trunk: one forward gives the
    next-token logits and the value at every position."""

    def __init__(self, config: HeadConfig) -> None:
        super().__init__()
        self.config = config
        self.policy = GPT(config.gpt)
        self.v_head = nn.Linear(config.gpt.n_embd, 1)
        _init_head(self.v_head, config.head_std)

    def forward(self, idx: Any) -> tuple[Tensor, Tensor]:
        h = self.policy.hidden(idx)  # (B, T, C)
        logits = self.policy.lm_head(h)  # (B, T, V)
        values = squeeze(self.v_head(h), -1)  # (B, T, 1) -> (B, T)
        return logits, values


def _init_head(head: nn.Linear, std: float) -> None:
    if std > 0:
        init.normal_(head.weight, std=std)
    else:
        init.zeros_(head.weight)
    init.zeros_(head.bias)


def completion_logprobs(logits: Tensor, idx: Any, prompt_len: int) -> Tensor:
    """log pi(idx[:, t] | idx[:, :t]) for the completion tokens t >= prompt_len.

    Shapes: logits (B, T, V) of the model on idx (B, T) -> (B, L), L = T - prompt_len. The
    token at t is predicted by the logits at t - 1.
    """
    idx = to_device_of(idx, logits)
    t = idx.shape[1]
    logp = F.log_softmax(logits[:, prompt_len - 1 : t - 1, :], axis=-1)  # (B, L, V)
    return squeeze(gather(logp, 2, idx[:, prompt_len:, None]), -1)  # (B, L, 1) -> (B, L)


def sequence_logprob(logits: Tensor, idx: Any, prompt_len: int) -> Tensor:
    """log pi(completion | prompt), the sum over its tokens: (B, T, V), (B, T) -> (B,)."""
    return sum(completion_logprobs(logits, idx, prompt_len), axis=-1)
