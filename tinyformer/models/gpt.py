"""GPT: a decoder-only transformer language model, in the shape of GPT-2 and nanoGPT.

References: Radford et al., "Language Models are Unsupervised Multitask Learners" (GPT-2, 2019);
Karpathy's nanoGPT, whose layout and parameter names this file follows so that weights compare.

Shapes: B batch, T time (sequence length), C width (n_embd), nh heads, hs = C / nh head size,
V vocabulary size.

    idx (B, T) -> token embedding wte + position embedding wpe -> (B, T, C)
               -> n_layer pre-LN blocks: x + attn(ln_1(x)), then x + mlp(ln_2(x))
               -> final LayerNorm ln_f -> lm_head (tied to wte) -> logits (B, T, V)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn, random
from tinyformer.autograd import no_grad
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.nn import init
from tinyformer.ops import reshape
from tinyformer.tensor import Tensor

__all__ = ["CONFIGS", "GPT", "GPTConfig"]


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 64  # longest sequence the model can read (positions it has embeddings for)
    vocab_size: int = 65  # number of distinct tokens
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads per block; n_embd must divide by it
    n_embd: int = 128  # width C of the residual stream
    dropout: float = 0.0  # after embeddings, attention output and MLP (0 for small data runs)
    bias: bool = True  # biases in Linear and LayerNorm (GPT-2 has them)

    def __post_init__(self) -> None:
        check_sizes(self, "block_size", "vocab_size", "n_layer", "n_head", "n_embd")
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig: n_embd {self.n_embd} is not divisible by n_head {self.n_head}"
            )
        check_dropout(self)

    def num_parameters(self) -> int:
        """Parameter count without building the model (the tied LM head counted once)."""
        c, b = self.n_embd, int(self.bias)
        ln = c * (1 + b)
        attn = c * 3 * c + 3 * c * b + c * c + c * b
        mlp = c * 4 * c + 4 * c * b + 4 * c * c + c * b
        block = 2 * ln + attn + mlp
        return self.vocab_size * c + self.block_size * c + self.n_layer * block + ln


CONFIGS = {
    "baby": GPTConfig(block_size=64, n_layer=4, n_head=4, n_embd=128),
    "small": GPTConfig(block_size=256, n_layer=6, n_head=6, n_embd=384),
    "gpt2": GPTConfig(block_size=1024, vocab_size=50257, n_layer=12, n_head=12, n_embd=768),
}


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList(
            nn.Block(config.n_embd, config.n_head, config.bias, config.dropout)
            for _ in range(config.n_layer)
        )
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying (Press & Wolf, 2017)
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's init: N(0, 0.02) for weights, zero biases, and the projections that write
        into the residual stream scaled by 1/sqrt(2 n_layer), so that the stream's variance
        does not grow with depth (each block adds two such writes)."""
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                init.normal_(p, std=0.02 / math.sqrt(2 * self.config.n_layer))
            elif name.endswith("weight") and p.ndim == 2:
                init.normal_(p, std=0.02)
            elif name.endswith("bias"):
                init.zeros_(p)

    def hidden(self, idx: Any) -> Tensor:
        """idx (B, T) token ids -> the final hidden states (B, T, C), after ln_f: what lm_head
        reads, and what the heads of a reward model or a value function read (models.rlhf).
        Host ids move to the model's device here."""
        idx = to_device_of(idx, self.wte.weight)  # (B, T) on the model's device
        if idx.ndim != 2:
            raise ValueError(f"GPT.forward: idx must be (B, T) token ids, got shape {idx.shape}")
        b, t = idx.shape
        if t == 0:  # attention over no keys is undefined
            raise ValueError(
                f"GPT.forward: idx of shape {idx.shape} holds no tokens; give one or more"
            )
        if t > self.config.block_size:
            raise ValueError(
                f"GPT.forward: sequence of length {t} is longer than the block size "
                f"{self.config.block_size}; crop it (generate() keeps the last block_size tokens)"
            )
        pos = backend.get_array_module(idx).arange(t)  # (T,) positions, where idx lives
        x = self.drop(self.wte(idx) + self.wpe(pos))  # (B, T, C) + (T, C) -> (B, T, C)
        for block in self.h:
            x = block(x, is_causal=True)  # (B, T, C)
        return self.ln_f(x)  # (B, T, C)

    def forward(self, idx: Any, targets: Any = None) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) token ids -> logits (B, T, V), and the mean cross-entropy against targets
        (B, T) when given (positions with target -100 are ignored). Host ids move to the
        model's device here; targets go to the loss as they are (it moves them)."""
        idx = to_device_of(idx, self.wte.weight)  # (B, T) on the model's device
        logits = self.lm_head(self.hidden(idx))  # (B, T, V)
        b, t = idx.shape
        if targets is None:
            return logits, None
        targets = array_of(targets)
        if targets.shape != idx.shape:  # each position's next token
            raise ValueError(
                f"GPT.forward: targets must have idx's shape {idx.shape}, got {targets.shape}"
            )
        v = self.config.vocab_size
        loss = F.cross_entropy(reshape(logits, b * t, v), targets.reshape(b * t))
        return logits, loss

    def generate(
        self,
        idx: Any,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
    ) -> np.ndarray:
        """Extend idx (B, T) by sampling one token at a time from the model's next-token
        distribution; returns (B, T + max_new_tokens) ids on the host, wherever the model is.
        Draws come from tinyformer's generator, so `tinyformer.manual_seed` makes sampling
        reproducible (and the same on every device).

        temperature < 1 sharpens the distribution; top_k keeps the k likeliest tokens; top_p
        keeps the smallest set of likeliest tokens whose probability reaches p (nucleus).
        """
        if max_new_tokens < 0:
            raise ValueError(f"generate: max_new_tokens must be >= 0, got {max_new_tokens}")
        if not 0 < temperature < math.inf:  # NaN fails it too
            raise ValueError(f"generate: temperature must be finite and > 0, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(
                f"generate: top_k must be >= 1 (None: no top-k filtering), got {top_k}"
            )
        if top_p is not None and not 0.0 < top_p <= 1.0:
            raise ValueError(f"generate: top_p must be in (0, 1], got {top_p}")
        idx = to_device_of(idx, self.wte.weight).astype(np.int64)  # a copy: idx is not changed
        idx = idx.reshape(1, -1) if idx.ndim < 2 else idx  # (B, T) on the model's device
        xp = backend.get_array_module(idx)
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                for _ in range(max_new_tokens):
                    context = idx[:, -self.config.block_size :]  # (B, <= block_size)
                    logits, _ = self(context)
                    # sampling runs on the host, from tinyformer's generator (so that a seed
                    # draws the same tokens on every device): one read-back per new token
                    last = backend.to_host(logits.data[:, -1, :]).astype(np.float64)  # (B, V)
                    nxt = _sample(last / temperature, top_k, top_p, random.generator())  # (B,)
                    nxt = backend.to_device(nxt[:, None], backend.device_of(idx))  # (B, 1)
                    idx = xp.concatenate([idx, nxt], axis=1)  # (B, T + 1)
        finally:
            self.train(was_training)
        return backend.to_host(idx)


def _sample(
    logits: np.ndarray, top_k: int | None, top_p: float | None, rng: np.random.Generator
) -> np.ndarray:
    """One token per row of logits (B, V), after top-k and top-p filtering."""
    if top_k is not None:
        k = min(top_k, logits.shape[-1])  # more than the vocabulary: keep it all
        kth = np.sort(logits, axis=-1)[:, -k][:, None]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-probs, axis=-1)
        sorted_probs = np.take_along_axis(probs, order, axis=-1)
        # keep a token if the mass before it is below top_p (the likeliest is always kept)
        before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
        keep = np.zeros_like(probs, dtype=bool)
        np.put_along_axis(keep, order, before < top_p, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(axis=-1, keepdims=True)
    return random.categorical(probs, 1, rng)[:, 0]
