"""BERT: a bidirectional transformer encoder, pretrained as a masked language model.

Reference: Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for Language
Understanding" (2019). Unlike GPT, every token attends to every other (no causal mask); only
padding is masked. Real BERT is post-LN; `norm="pre"` gives the pre-LN variant.

Shapes: B batch, T sequence length, C width (d_model), V vocabulary size, L labels.

    input_ids (B, T) -> token + position + token-type embeddings, LayerNorm -> (B, T, C)
                     -> n_layer blocks (attention over non-padding keys, MLP)  -> (B, T, C)
    masked-LM head:  Linear C->C, GELU, LayerNorm, then x @ tok_emb^T + bias  -> (B, T, V)
    pooler:          tanh(Linear(hidden[:, 0]))  (the [CLS] position)         -> (B, C)
    NSP head:        Linear C->2 on the pooled vector (is B A's next?)       -> (B, 2)
    classifier:      Linear C->L on the pooled vector                        -> (B, L)
    token tagger:    Linear C->L on every token's vector                     -> (B, T, L)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.nn import init
from tinyformer.ops import getitem, linear, reshape
from tinyformer.tensor import Tensor

__all__ = [
    "BERT_CONFIGS", "Bert", "BertConfig", "BertForMaskedLM", "BertForPreTraining",
    "BertForSequenceClassification", "BertForTokenClassification",
]  # fmt: skip


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522  # WordPiece vocabulary (bert-base-uncased's)
    max_position: int = 512  # longest sequence (learned position embeddings)
    type_vocab_size: int = 2  # segment ids: sentence A = 0, sentence B = 1
    n_layer: int = 12  # transformer blocks
    n_head: int = 12  # attention heads; d_model must divide by it
    d_model: int = 768  # width C of the residual stream ("hidden_size")
    d_ff: int = 3072  # MLP hidden width ("intermediate_size", 4C)
    dropout: float = 0.1  # after embeddings, attention output and MLP
    norm: str = "post"  # "post": LayerNorm after each residual add (BERT); "pre": before
    eps: float = 1e-12  # LayerNorm epsilon (BERT's)
    pad_id: int = 0  # the [PAD] id: its embedding gets no gradient

    def __post_init__(self) -> None:
        check_sizes(
            self, "vocab_size", "max_position", "type_vocab_size", "n_layer", "n_head", "d_model",
            "d_ff",
        )  # fmt: skip
        if self.d_model % self.n_head:
            raise ValueError(
                f"BertConfig: d_model {self.d_model} is not divisible by n_head {self.n_head}"
            )
        if self.norm not in ("post", "pre"):
            raise ValueError(f"BertConfig: norm must be 'post' or 'pre', got {self.norm!r}")
        check_dropout(self)

    def num_parameters(self, pooler: bool = True, mlm_head: bool = False) -> int:
        """Count without building: the encoder (as Hugging Face's BertModel, with the pooler),
        optionally the masked-LM head (its output matrix is tied to the token embeddings)."""
        c, f = self.d_model, self.d_ff
        embeddings = (self.vocab_size + self.max_position + self.type_vocab_size) * c + 2 * c
        block = 4 * (c * c + c) + (c * f + f) + (f * c + c) + 2 * 2 * c
        total = embeddings + self.n_layer * block + (2 * c if self.norm == "pre" else 0)
        total += (c * c + c) if pooler else 0
        total += (c * c + c + 2 * c + self.vocab_size) if mlm_head else 0
        return total


BERT_CONFIGS = {
    "tiny": BertConfig(vocab_size=4000, max_position=64, n_layer=2, n_head=4, d_model=128,
                       d_ff=512, dropout=0.1),
    "bert_base": BertConfig(),  # 110M (Devlin et al., table: BERT_BASE)
    "bert_large": BertConfig(n_layer=24, n_head=16, d_model=1024, d_ff=4096),  # 340M
}  # fmt: skip


class Bert(nn.Module):
    """The encoder: ids -> contextual vectors (B, T, C)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        c = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, c)
        self.pos_emb = nn.Embedding(config.max_position, c)
        self.type_emb = nn.Embedding(config.type_vocab_size, c)
        self.emb_ln = nn.LayerNorm(c, eps=config.eps)
        self.drop = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            nn.Block(c, config.n_head, dropout=config.dropout, eps=config.eps,
                     norm_first=config.norm == "pre", hidden=config.d_ff)
            for _ in range(config.n_layer)
        )  # fmt: skip
        # pre-LN leaves the residual stream un-normalised: one final LayerNorm, as GPT-2's ln_f
        self.ln_f = nn.LayerNorm(c, eps=config.eps) if config.norm == "pre" else nn.Identity()
        self.pooler = nn.Linear(c, c)
        init_bert_weights(self)

    def forward(
        self, input_ids: Any, attention_mask: Any = None, token_type_ids: Any = None
    ) -> Tensor:
        """input_ids (B, T); attention_mask (B, T), 1 at real tokens and 0 at padding (None: all
        real); token_type_ids (B, T) (None: all 0) -> hidden states (B, T, C). Host arrays
        move to the model's device here."""
        weight = self.tok_emb.weight  # where the model is
        ids = to_device_of(input_ids, weight)
        if ids.ndim != 2:
            raise ValueError(f"Bert: input_ids must be (B, T), got shape {ids.shape}")
        b, t = ids.shape
        mask = None if attention_mask is None else to_device_of(attention_mask, weight)
        types = None if token_type_ids is None else to_device_of(token_type_ids, weight)
        for name, extra in (("attention_mask", mask), ("token_type_ids", types)):
            if extra is not None and extra.shape != ids.shape:
                raise ValueError(f"Bert: {name} must have input_ids' shape {ids.shape}, got "
                                 f"{extra.shape}")  # fmt: skip
        if t == 0:  # attention over no keys is undefined
            raise ValueError(f"Bert: input_ids of shape {ids.shape} hold no tokens")
        if t > self.config.max_position:
            raise ValueError(
                f"Bert: sequence of length {t} is longer than max_position "
                f"{self.config.max_position}; truncate it (the tokenizer's max_length)"
            )
        xp = backend.get_array_module(ids)  # positions and segments are made where ids live
        # one segment type (DistilBERT): every token is in segment 0, whatever the tokenizer says
        one_type = types is None or self.config.type_vocab_size == 1
        types = xp.zeros_like(ids) if one_type else types
        x = self.tok_emb(ids) + self.pos_emb(xp.arange(t)) + self.type_emb(types)  # (B, T, C)
        x = self.drop(self.emb_ln(x))
        pad = None if mask is None else mask == 0  # (B, T), True at padding
        for layer in self.layers:
            x = layer(x, key_padding_mask=pad)  # (B, T, C)
        return self.ln_f(x)

    def pool(self, hidden: Tensor) -> Tensor:
        """hidden (B, T, C) -> tanh(W h_[CLS] + b) (B, C), BERT's sentence vector for
        classification (trained by next-sentence prediction in the paper, by the task here)."""
        return F.tanh(self.pooler(getitem(hidden, (slice(None), 0))))


def init_bert_weights(module: nn.Module) -> None:
    """BERT's initialisation: N(0, 0.02) for every weight matrix and embedding table, zero
    biases, LayerNorm scale 1 and shift 0."""
    for m in module.modules():
        if isinstance(m, nn.LayerNorm):
            init.ones_(m.weight)
            init.zeros_(m.bias)
        elif isinstance(m, (nn.Linear, nn.Embedding)):
            init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                init.zeros_(m.bias)


def mean_pool(hidden: Tensor | np.ndarray, attention_mask: Any) -> np.ndarray:
    """Sentence embeddings as sentence-transformers makes them: the mean of the token vectors
    over real tokens (padding left out), then scaled to unit length. (B, T, C) -> (B, C)."""
    # computed on the host in float64 (a read-back when the model is on a device)
    h = backend.to_host(array_of(hidden)).astype(np.float64, copy=False)
    m = backend.to_host(array_of(attention_mask)).astype(np.float64, copy=False)[:, :, None]
    mean = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)  # (B, C)
    return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


class BertForMaskedLM(nn.Module):
    """The encoder with BERT's masked-LM head, whose output matrix is the token embedding."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = Bert(config)
        self.mlm_dense = nn.Linear(config.d_model, config.d_model)
        self.mlm_act = nn.GELU()
        self.mlm_ln = nn.LayerNorm(config.d_model, eps=config.eps)
        self.mlm_bias = nn.Parameter(np.zeros(config.vocab_size, np.float32))
        init_bert_weights(self)

    def head(self, h: Tensor) -> Tensor:
        """(..., C) -> logits (..., V), through the tied output matrix."""
        return linear(self.mlm_ln(self.mlm_act(self.mlm_dense(h))), self.bert.tok_emb.weight,
                      self.mlm_bias)  # fmt: skip

    def forward(
        self,
        input_ids: Any,
        labels: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        ignore_index: int = -100,
    ) -> tuple[Tensor, Tensor | None]:
        """Without labels: logits (B, T, V). With labels (B, T) (`ignore_index` where nothing is
        to be predicted): the logits of the labelled positions only (N, V), in row-major
        order, and their mean cross-entropy. Running the V-wide head only where a loss is
        counted saves ~85% of its cost, since 15% of tokens are chosen."""
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, C)
        return self.mlm(hidden, labels, ignore_index)

    def mlm(
        self, hidden: Tensor, labels: Any = None, ignore_index: int = -100
    ) -> tuple[Tensor, Tensor | None]:
        """The masked-LM head on hidden states (B, T, C), as `forward` describes."""
        if labels is None:
            return self.head(hidden), None
        labels = array_of(labels)
        b, t, c = hidden.shape
        if labels.shape != (b, t):  # one label per token: another shape picked the wrong rows
            raise ValueError(f"{type(self).__name__}: labels must have input_ids' shape "
                             f"{(b, t)}, got {labels.shape}")  # fmt: skip
        # found where the labels are: host labels need no read-back from the device (N depends
        # on the data, so finding the rows on a device waits for it), and N ids are moved
        rows = backend.get_array_module(labels).flatnonzero(labels.reshape(-1) != ignore_index)
        picked = getitem(reshape(hidden, b * t, c), to_device_of(rows, hidden))  # (N, C)
        logits = self.head(picked)  # (N, V)
        return logits, F.cross_entropy(logits, labels.reshape(-1)[rows])


class BertForPreTraining(BertForMaskedLM):
    """BERT's two pretraining heads: masked LM, and next-sentence prediction, a Linear C->2 on
    the pooled [CLS] vector (Hugging Face's `cls.seq_relationship`). Label 0: B follows A;
    1: B is a random sentence (`tinyformer.data.nsp`)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__(config)
        self.nsp_head = nn.Linear(config.d_model, 2)
        init_bert_weights(self.nsp_head)

    def forward(
        self,
        input_ids: Any,
        labels: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        next_sentence_label: Any = None,
        ignore_index: int = -100,
    ) -> tuple[tuple[Tensor, Tensor], Tensor | None]:
        """-> ((masked-LM logits, NSP logits (B, 2)), loss). The masked-LM logits are as
        `BertForMaskedLM` gives them ((B, T, V), or (N, V) with labels); the loss is the sum
        of the masked-LM and NSP cross-entropies of the labels given (None without any)."""
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, C)
        mlm_logits, loss = self.mlm(hidden, labels, ignore_index)
        nsp_logits = self.nsp_head(self.bert.pool(hidden))  # (B, 2)
        if next_sentence_label is not None:
            target = array_of(next_sentence_label)
            if target.shape != (hidden.shape[0],):
                raise ValueError(f"BertForPreTraining: next_sentence_label must be "
                                 f"({hidden.shape[0]},), got {target.shape}")  # fmt: skip
            nsp_loss = F.cross_entropy(nsp_logits, target)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return (mlm_logits, nsp_logits), loss


class BertForSequenceClassification(nn.Module):
    """The encoder, the pooler and a linear classifier on the [CLS] vector."""

    def __init__(self, config: BertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self.config, self.num_labels = config, num_labels
        self.bert = Bert(config)
        self.drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_bert_weights(self)

    def forward(
        self,
        input_ids: Any,
        labels: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
    ) -> tuple[Tensor, Tensor | None]:
        """-> logits (B, L), and their mean cross-entropy against labels (B,) when given."""
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, C)
        logits = self.classifier(self.drop(self.bert.pool(hidden)))  # (B, L)
        loss = None if labels is None else F.cross_entropy(logits, array_of(labels))
        return logits, loss


class BertForTokenClassification(nn.Module):
    """The encoder and a linear classifier on every token's vector (tagging: named entities,
    parts of speech, which tokens were tampered with)."""

    def __init__(self, config: BertConfig, num_labels: int = 2) -> None:
        super().__init__()
        self.config, self.num_labels = config, num_labels
        self.bert = Bert(config)
        self.drop = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.d_model, num_labels)
        init_bert_weights(self)

    def forward(
        self,
        input_ids: Any,
        labels: Any = None,
        attention_mask: Any = None,
        token_type_ids: Any = None,
        ignore_index: int = -100,
    ) -> tuple[Tensor, Tensor | None]:
        """-> logits (B, T, L), and with labels (B, T) their mean cross-entropy over the
        tokens whose label is not `ignore_index` and whose attention_mask is 1 (padding never
        counts, whatever its label)."""
        hidden = self.bert(input_ids, attention_mask, token_type_ids)  # (B, T, C)
        logits = self.classifier(self.drop(hidden))  # (B, T, L)
        if labels is None:
            return logits, None
        labels = array_of(labels)
        b, t, n = logits.shape
        if labels.shape != (b, t):
            raise ValueError(f"BertForTokenClassification: labels must have input_ids' shape "
                             f"{(b, t)}, got {labels.shape}")  # fmt: skip
        if attention_mask is not None:
            # the mask is moved to where the labels are (usually the host: nothing moves)
            real = backend.to_device(array_of(attention_mask), backend.device_of(labels)) != 0
            labels = backend.get_array_module(labels).where(real, labels, ignore_index)
        flat = reshape(logits, b * t, n)  # (B T, L)
        return logits, F.cross_entropy(flat, labels.reshape(-1), ignore_index=ignore_index)
