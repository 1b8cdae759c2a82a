"""XLM: a BERT encoder that knows which language each token is in.

Reference: Lample & Conneau, "Cross-lingual Language Model Pretraining" (2019). The encoder is
BERT's; what changes is the input:

- a language embedding is added to every token (where BERT adds its segment embedding), so
  one shared vocabulary and one set of weights serve every language;
- positions are given by the caller, so that in translation language modelling (TLM) they
  restart at 0 for the second sentence of a pair: a sentence and its translation sit side by
  side, the language embeddings say which is which, and a masked word in one can be filled in
  by reading the other.

Shapes: B batch, T sequence length, C width (d_model), V vocabulary size, L labels, N masked
positions in a batch.

    input_ids, positions, langs (B, T) -> token + position + language embeddings,
                                          LayerNorm                        -> (B, T, C)
                                       -> n_layer blocks (attention over non-padding keys)
    masked-LM head:  Linear C->C, GELU, LayerNorm, x @ tok_emb^T + bias  -> (N, V)
    features:        hidden[:, 0] ("cls", BERT's), or the mean over the real
                     tokens ("mean")                                     -> (B, C)
    classifier:      Linear C->L on tanh(Linear(features))               -> (B, L)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.models.bert import init_bert_weights
from tinyformer.ops import getitem, linear, reshape
from tinyformer.tensor import Tensor

__all__ = ["XLM", "XLMConfig", "XLMForMaskedLM", "XLMForSequenceClassification"]


@dataclass(frozen=True)
class XLMConfig:
    vocab_size: int = 300  # one vocabulary shared by every language (BPE trained on all)
    n_langs: int = 2  # language ids 0 .. n_langs - 1
    max_position: int = 64  # longest sentence (positions restart for a pair's second one)
    n_layer: int = 2  # transformer blocks
    n_head: int = 4  # attention heads; d_model must divide by it
    d_model: int = 64  # width C of the residual stream
    d_ff: int = 256  # MLP hidden width
    dropout: float = 0.1  # after embeddings, attention output and MLP
    eps: float = 1e-12  # LayerNorm epsilon (BERT's)

    def __post_init__(self) -> None:
        check_sizes(self, "vocab_size", "n_langs", "max_position", "n_layer", "n_head",
                    "d_model", "d_ff")  # fmt: skip
        if self.d_model % self.n_head:
            raise ValueError(
                f"XLMConfig: d_model {self.d_model} is not divisible by n_head {self.n_head}"
            )
        check_dropout(self)


class XLM(nn.Module):
    """The encoder: (ids, positions, languages) -> contextual vectors (B, T, C)."""

    def __init__(self, config: XLMConfig) -> None:
        super().__init__()
        self.config = config
        c = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, c)
        self.pos_emb = nn.Embedding(config.max_position, c)
        self.lang_emb = nn.Embedding(config.n_langs, c)
        self.emb_ln = nn.LayerNorm(c, eps=config.eps)
        self.drop = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            nn.Block(c, config.n_head, dropout=config.dropout, eps=config.eps,
                     norm_first=False, hidden=config.d_ff)
            for _ in range(config.n_layer)
        )  # fmt: skip
        self.pooler = nn.Linear(c, c)
        init_bert_weights(self)

    def embed(self, ids: Any, langs: Any, positions: Any = None) -> Tensor:
        """Token + position + language embeddings, before LayerNorm: (B, T) each -> (B, T, C).
        positions None: 0 .. T-1 in every row."""
        weight = self.tok_emb.weight
        # a GPU would wrap a bad index silently: checked as given (host arrays, usually), before
        # they move
        for name, value, bound in (("positions", positions, self.config.max_position),
                                   ("langs", langs, self.config.n_langs)):  # fmt: skip
            value = None if value is None else array_of(value)
            if value is not None and value.size and not 0 <= value.min() <= value.max() < bound:
                raise ValueError(f"XLM: {name} must be in [0, {bound}), got values from "
                                 f"{int(value.min())} to {int(value.max())}")  # fmt: skip
        ids, langs = to_device_of(ids, weight), to_device_of(langs, weight)
        if ids.ndim != 2 or langs.shape != ids.shape:
            raise ValueError(f"XLM: input_ids must be (B, T) and langs the same shape, got "
                             f"{ids.shape} and {langs.shape}")  # fmt: skip
        if ids.shape[1] == 0:  # attention over no keys is undefined
            raise ValueError(f"XLM: input_ids of shape {ids.shape} hold no tokens")
        xp = backend.get_array_module(ids)
        if positions is None:
            positions = xp.broadcast_to(xp.arange(ids.shape[1]), ids.shape)
        positions = to_device_of(positions, weight)
        if positions.shape != ids.shape:
            raise ValueError(f"XLM: positions must have input_ids' shape {ids.shape}, got "
                             f"{positions.shape}")  # fmt: skip
        return self.tok_emb(ids) + self.pos_emb(positions) + self.lang_emb(langs)  # (B, T, C)

    def forward(
        self, input_ids: Any, langs: Any, positions: Any = None, attention_mask: Any = None
    ) -> Tensor:
        """input_ids, langs, positions (B, T); attention_mask (B, T), 1 at real tokens, 0 at
        padding (None: all real) -> hidden states (B, T, C)."""
        x = self.drop(self.emb_ln(self.embed(input_ids, langs, positions)))  # (B, T, C)
        pad = None
        if attention_mask is not None:
            pad = to_device_of(attention_mask, self.tok_emb.weight) == 0  # (B, T), True: pad
        for layer in self.layers:
            x = layer(x, key_padding_mask=pad)  # (B, T, C)
        return x

    def pool(self, hidden: Tensor) -> Tensor:
        """hidden (B, T, C) -> tanh(W h_0 + b) (B, C): the first token's vector."""
        return F.tanh(self.pooler(getitem(hidden, (slice(None), 0))))


def masked_lm_loss(
    logits_of: Any, hidden: Tensor, labels: Any, ignore_index: int = -100
) -> tuple[Tensor, Tensor]:
    """The masked-LM loss on hidden states (B, T, C): the head `logits_of` ((N, C) -> (N, V))
    runs only on the N positions whose label is not `ignore_index` (in row-major order); ->
    (logits (N, V), mean cross-entropy). In TLM those positions are on both sides of a pair."""
    labels = array_of(labels)
    b, t, c = hidden.shape
    if labels.shape != (b, t):
        raise ValueError(f"XLM: labels must have input_ids' shape {(b, t)}, got {labels.shape}")
    rows = backend.get_array_module(labels).flatnonzero(labels.reshape(-1) != ignore_index)
    if rows.size == 0:  # a mean over nothing is NaN: say why instead
        raise ValueError("XLM: labels mark no position to predict")
    picked = getitem(reshape(hidden, b * t, c), to_device_of(rows, hidden))  # (N, C)
    logits = logits_of(picked)  # (N, V)
    return logits, F.cross_entropy(logits, labels.reshape(-1)[rows])


class XLMForMaskedLM(nn.Module):
    """The encoder with a masked-LM head tied to the token embeddings; one model for both MLM
    (one sentence, one language) and TLM (a sentence pair, two languages)."""

    def __init__(self, config: XLMConfig) -> None:
        super().__init__()
        self.config = config
        self.xlm = XLM(config)
        self.mlm_dense = nn.Linear(config.d_model, config.d_model)
        self.mlm_act = nn.GELU()
        self.mlm_ln = nn.LayerNorm(config.d_model, eps=config.eps)
        self.mlm_bias = nn.Parameter(np.zeros(config.vocab_size, np.float32))
        init_bert_weights(self)

    def head(self, h: Tensor) -> Tensor:
        """(..., C) -> logits (..., V), through the tied output matrix."""
        return linear(self.mlm_ln(self.mlm_act(self.mlm_dense(h))), self.xlm.tok_emb.weight,
                      self.mlm_bias)  # fmt: skip

    def forward(
        self,
        input_ids: Any,
        langs: Any,
        labels: Any = None,
        positions: Any = None,
        attention_mask: Any = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Without labels: logits (B, T, V). With labels (B, T) (-100 where nothing is to be
        predicted): the labelled positions' logits (N, V) and their mean cross-entropy."""
        hidden = self.xlm(input_ids, langs, positions, attention_mask)  # (B, T, C)
        if labels is None:
            return self.head(hidden), None
        return masked_lm_loss(self.head, hidden, labels)


class XLMForSequenceClassification(nn.Module):
    """The encoder, the pooler and a linear classifier (XLM's cross-lingual NLI: fine-tuned in
    one language, tested in the others). The classifier reads the first token's last-layer
    vector (`pooling` "cls", BERT's) or the mean of the real tokens' ("mean").

    `features` and `classify` are the two halves of `forward`, so that a caller can shift the
    features in between: centring each language's features on their mean, for instance."""

    def __init__(self, config: XLMConfig, num_labels: int = 3, pooling: str = "cls") -> None:
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"XLMForSequenceClassification: pooling must be 'cls' or 'mean', "
                             f"got {pooling!r}")  # fmt: skip
        self.config, self.num_labels, self.pooling = config, num_labels, pooling
        self.xlm = XLM(config)
        self.drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_bert_weights(self)

    def features(
        self, input_ids: Any, langs: Any, positions: Any = None, attention_mask: Any = None
    ) -> Tensor:
        """(B, T) inputs -> the vector the classifier reads (B, C)."""
        hidden = self.xlm(input_ids, langs, positions, attention_mask)  # (B, T, C)
        if self.pooling == "cls":
            return getitem(hidden, (slice(None), 0))
        b, t, _ = hidden.shape
        if attention_mask is None:
            weight = backend.get_array_module(hidden.data).ones((b, t), hidden.dtype)
        else:
            weight = to_device_of(attention_mask, hidden).astype(hidden.dtype)
        weight = weight / weight.sum(1, keepdims=True)  # (B, T), each row sums to 1
        return (hidden * Tensor(weight[:, :, None])).sum(1)  # (B, C)

    def classify(self, features: Tensor, labels: Any = None) -> tuple[Tensor, Tensor | None]:
        """features (B, C) -> logits (B, L) through tanh(pooler), and their mean cross-entropy
        against labels (B,) when given."""
        logits = self.classifier(self.drop(F.tanh(self.xlm.pooler(features))))  # (B, L)
        loss = None if labels is None else F.cross_entropy(logits, array_of(labels))
        return logits, loss

    def forward(
        self,
        input_ids: Any,
        langs: Any,
        labels: Any = None,
        positions: Any = None,
        attention_mask: Any = None,
    ) -> tuple[Tensor, Tensor | None]:
        """-> logits (B, L), and their mean cross-entropy against labels (B,) when given."""
        return self.classify(self.features(input_ids, langs, positions, attention_mask), labels)
