"""ViLBERT: two transformer streams, image regions and words, that query each other.

Reference: Lu et al., "ViLBERT: Pretraining Task-Agnostic Visiolinguistic Representations for
Vision-and-Language Tasks" (2019). Each stream keeps its own weights and width. A co-attention
layer lets each stream's queries attend to the *other* stream's keys and values; ordinary
self-attention follows in each stream. Pretraining: masked multimodal modelling (masked words
predict the word, masked regions predict their class) and image-text alignment (is this the
image's caption?), read from the product of the two streams' pooled vectors.

Shapes: B batch, T words, R regions, F features per region, Ct and Ci the text and image
widths, nh heads, V vocabulary, K region classes, A answers.

    words   input_ids (B, T) -> token + position embeddings -> n_text_layer blocks (B, T, Ct)
    regions (B, R, F), boxes (B, R, 5) -> [IMG] (mean feature, whole-image box) prepended
            -> Linear(F) + Linear(box) -> (B, 1 + R, Ci)
    n_co_layer x: text  <- text  + attn(q = text,  k = v = image);  image <- image + attn(q =
                  image, k = v = text), both from the layer's inputs; then a block per stream
    pooled: tanh(W h_[CLS]) * tanh(W' h_[IMG])  (B, Ct)
    heads:  words (B, T, V), regions (B, R, K), alignment (B, 2), answers (B, A)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.models.bert import init_bert_weights
from tinyformer.ops import getitem, reshape
from tinyformer.tensor import Tensor

__all__ = ["CoAttention", "ViLBERT", "ViLBERTConfig", "ViLBERTForPreTraining",
           "ViLBERTForQuestionAnswering", "encoder_state", "masked_cross_entropy"]  # fmt: skip


@dataclass(frozen=True)
class ViLBERTConfig:
    vocab_size: int = 24  # words (tinyformer.data.scenes.VOCAB)
    max_position: int = 16  # longest text (learned position embeddings)
    region_dim: int = 64  # F: features per region (an 8x8 digit's pixels)
    num_classes: int = 10  # K: region classes, the targets of masked regions
    n_text_layer: int = 1  # text-only blocks before the first co-attention (ViLBERT: BERT's)
    n_co_layer: int = 2  # co-attention layers, each followed by one block per stream
    n_head: int = 4  # attention heads, in both streams
    d_text: int = 64  # Ct: width of the text stream
    d_image: int = 64  # Ci: width of the image stream (ViLBERT's is wider than its text's)
    dropout: float = 0.1  # after embeddings, attention output and MLP

    def __post_init__(self) -> None:
        check_sizes(self, "vocab_size", "max_position", "region_dim", "num_classes", "n_co_layer",
                    "n_head", "d_text", "d_image")  # fmt: skip
        for name in ("d_text", "d_image"):
            if getattr(self, name) % self.n_head:
                raise ValueError(f"ViLBERTConfig: {name} {getattr(self, name)} is not divisible "
                                 f"by n_head {self.n_head}")  # fmt: skip
        if self.n_text_layer < 0:
            raise ValueError(f"ViLBERTConfig: n_text_layer must be >= 0, got {self.n_text_layer}")
        check_dropout(self)


class CoAttention(nn.Module):
    """ViLBERT's co-attentional layer (pre-LN): each stream's queries attend to the other
    stream's keys and values, both from the layer's inputs, then each stream's MLP.

    text (B, T, Ct), image (B, S, Ci) -> the same shapes; with need_weights also the weights,
    text-to-image (B, nh, T, S) and image-to-text (B, nh, S, T)."""

    def __init__(self, d_text: int, d_image: int, n_head: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.ln_text = nn.LayerNorm(d_text)
        self.ln_image = nn.LayerNorm(d_image)
        # queries from one stream; keys and values projected from the other's width to its own
        self.text_attn = nn.Attention(d_text, n_head, dropout=dropout, cross=True,
                                      context_dim=d_image)  # fmt: skip
        self.image_attn = nn.Attention(d_image, n_head, dropout=dropout, cross=True,
                                       context_dim=d_text)  # fmt: skip
        self.ln_text_2 = nn.LayerNorm(d_text)
        self.mlp_text = nn.MLP(d_text, dropout=dropout)
        self.ln_image_2 = nn.LayerNorm(d_image)
        self.mlp_image = nn.MLP(d_image, dropout=dropout)

    def forward(
        self, text: Tensor, image: Tensor, text_pad: Any = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, Tensor, Tensor]:
        """text_pad (B, T): True at padding words, which the image's queries do not read."""
        t, i = self.ln_text(text), self.ln_image(image)
        # text (B, T, Ct) [, weights (B, nh, T, S)]; image (B, S, Ci) [, weights (B, nh, S, T)]
        a_text = self.text_attn(t, i, need_weights=need_weights)
        a_image = self.image_attn(i, t, key_padding_mask=text_pad, need_weights=need_weights)
        weights = ()
        if need_weights:
            (a_text, w_text), (a_image, w_image) = a_text, a_image
            weights = (w_text, w_image)
        text, image = text + a_text, image + a_image
        text = text + self.mlp_text(self.ln_text_2(text))
        image = image + self.mlp_image(self.ln_image_2(image))
        return (text, image, *weights)


class ViLBERT(nn.Module):
    """The two-stream encoder: (words, regions) -> (text (B, T, Ct), image (B, 1 + R, Ci))."""

    def __init__(self, config: ViLBERTConfig) -> None:
        super().__init__()
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_text)
        self.pos_emb = nn.Embedding(c.max_position, c.d_text)
        self.text_ln = nn.LayerNorm(c.d_text)
        self.region_proj = nn.Linear(c.region_dim, c.d_image)
        self.box_proj = nn.Linear(5, c.d_image)  # ViLBERT's 5-d location: x1, y1, x2, y2, area
        self.image_ln = nn.LayerNorm(c.d_image)
        self.drop = nn.Dropout(c.dropout)
        self.text_blocks = nn.ModuleList(
            nn.Block(c.d_text, c.n_head, dropout=c.dropout) for _ in range(c.n_text_layer)
        )
        self.co_layers = nn.ModuleList(
            CoAttention(c.d_text, c.d_image, c.n_head, c.dropout) for _ in range(c.n_co_layer)
        )
        self.text_layers = nn.ModuleList(
            nn.Block(c.d_text, c.n_head, dropout=c.dropout) for _ in range(c.n_co_layer)
        )
        self.image_layers = nn.ModuleList(
            nn.Block(c.d_image, c.n_head, dropout=c.dropout) for _ in range(c.n_co_layer)
        )
        self.ln_text_f, self.ln_image_f = nn.LayerNorm(c.d_text), nn.LayerNorm(c.d_image)
        # both pooled to the text's width, so that their product is defined
        self.text_pool, self.image_pool = (
            nn.Linear(c.d_text, c.d_text),
            nn.Linear(c.d_image, c.d_text),
        )
        init_bert_weights(self)

    def embed_image(self, regions: Any, boxes: Any) -> Tensor:
        """regions (B, R, F), boxes (B, R, 5) -> (B, 1 + R, Ci), the [IMG] token first: the
        mean region feature at a box covering the whole image."""
        weight = self.region_proj.weight
        feats = to_device_of(regions, weight).astype(weight.dtype, copy=False)
        boxes = to_device_of(boxes, weight).astype(weight.dtype, copy=False)
        b, r, f = feats.shape
        if f != self.config.region_dim or boxes.shape != (b, r, 5):
            raise ValueError(f"ViLBERT: regions must be (B, R, {self.config.region_dim}) and "
                             f"boxes (B, R, 5), got {feats.shape} and {boxes.shape}")  # fmt: skip
        xp = backend.get_array_module(feats)
        whole = xp.broadcast_to(xp.asarray([0, 0, 1, 1, 1], feats.dtype), (b, 1, 5))
        feats = xp.concatenate([feats.mean(axis=1, keepdims=True), feats], axis=1)  # (B, 1+R, F)
        boxes = xp.concatenate([whole, boxes], axis=1)  # (B, 1 + R, 5)
        return self.image_ln(self.region_proj(feats) + self.box_proj(boxes))

    def forward(
        self, input_ids: Any, regions: Any, boxes: Any, attention_mask: Any = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, list[tuple[Tensor, Tensor]]]:  # fmt: skip
        """input_ids (B, T), attention_mask (B, T) 1 at real words (None: all real) -> text
        (B, T, Ct), image (B, 1 + R, Ci) [, per co-attention layer (text-to-image (B, nh, T,
        1 + R), image-to-text (B, nh, 1 + R, T)) weights]."""
        ids = to_device_of(input_ids, self.tok_emb.weight)
        if ids.ndim != 2 or not 0 < ids.shape[1] <= self.config.max_position:
            raise ValueError(f"ViLBERT: input_ids must be (B, T) with 0 < T <= "
                             f"{self.config.max_position}, got {ids.shape}")  # fmt: skip
        xp = backend.get_array_module(ids)
        text = self.drop(self.text_ln(self.tok_emb(ids) + self.pos_emb(xp.arange(ids.shape[1]))))
        image = self.drop(self.embed_image(regions, boxes))  # (B, 1 + R, Ci)
        pad = None if attention_mask is None else array_of(attention_mask) == 0  # (B, T)
        for block in self.text_blocks:
            text = block(text, key_padding_mask=pad)
        maps = []
        for co, text_block, image_block in zip(self.co_layers, self.text_layers, self.image_layers):
            text, image, *weights = co(text, image, pad, need_weights=need_weights)
            maps.append(tuple(weights))  # empty without need_weights
            text, image = text_block(text, key_padding_mask=pad), image_block(image)
        text, image = self.ln_text_f(text), self.ln_image_f(image)
        return (text, image, maps) if need_weights else (text, image)

    def pool(self, text: Tensor, image: Tensor) -> Tensor:
        """ViLBERT's joint vector: tanh(W h_[CLS]) * tanh(W' h_[IMG]) (B, Ct)."""
        h_cls = F.tanh(self.text_pool(getitem(text, (slice(None), 0))))
        return h_cls * F.tanh(self.image_pool(getitem(image, (slice(None), 0))))


def masked_cross_entropy(logits: Tensor, labels: Any, ignore_index: int = -100) -> Tensor | None:
    """Mean cross-entropy of logits (..., K) over the labels (...) that are not `ignore_index`;
    None when there are none (the mean of nothing is not a loss)."""
    labels = array_of(labels)
    if not (labels != ignore_index).any():
        return None
    k = logits.shape[-1]
    return F.cross_entropy(reshape(logits, -1, k), labels.reshape(-1), ignore_index=ignore_index)


class ViLBERTForPreTraining(nn.Module):
    """ViLBERT with its pretraining heads: masked words, masked regions, image-text alignment."""

    def __init__(self, config: ViLBERTConfig) -> None:
        super().__init__()
        self.config = config
        self.vilbert = ViLBERT(config)
        self.word_head = nn.Linear(config.d_text, config.vocab_size)
        self.region_head = nn.Linear(config.d_image, config.num_classes)
        self.align_head = nn.Linear(config.d_text, 2)
        init_bert_weights(self)

    def forward(
        self, inputs: tuple, targets: tuple | None = None
    ) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor | None]:
        """inputs (input_ids, attention_mask, regions, boxes); targets (word labels (B, T),
        region labels (B, R), alignment (B,): 0 the caption is the image's, 1 it is not), -100
        where nothing is to be predicted -> ((word logits (B, T, V), region logits (B, R, K),
        alignment logits (B, 2)), the sum of the three mean cross-entropies)."""
        ids, mask, regions, boxes = inputs
        text, image = self.vilbert(ids, regions, boxes, mask)
        words = self.word_head(text)  # (B, T, V)
        classes = self.region_head(getitem(image, (slice(None), slice(1, None))))  # (B, R, K)
        align = self.align_head(self.vilbert.pool(text, image))  # (B, 2)
        if targets is None:
            return (words, classes, align), None
        losses = [masked_cross_entropy(logits, labels)
                  for logits, labels in zip((words, classes, align), targets)]  # fmt: skip
        losses = [loss for loss in losses if loss is not None]
        total = losses[0] if losses else None
        for loss in losses[1:]:
            total = total + loss
        return (words, classes, align), total


class ViLBERTForQuestionAnswering(nn.Module):
    """ViLBERT and an answer classifier (an MLP on the pooled vector, as for VQA)."""

    def __init__(self, config: ViLBERTConfig, num_answers: int = 10) -> None:
        super().__init__()
        self.config, self.num_answers = config, num_answers
        self.vilbert = ViLBERT(config)
        self.qa_fc = nn.Linear(config.d_text, 2 * config.d_text)
        self.qa_act = nn.GELU()
        self.qa_out = nn.Linear(2 * config.d_text, num_answers)
        init_bert_weights(self)

    def forward(self, inputs: tuple, answers: Any = None) -> tuple[Tensor, Tensor | None]:
        """inputs (input_ids, attention_mask, regions, boxes) -> answer logits (B, A), and
        their mean cross-entropy against answers (B,) when given."""
        ids, mask, regions, boxes = inputs
        text, image = self.vilbert(ids, regions, boxes, mask)
        logits = self.qa_out(self.qa_act(self.qa_fc(self.vilbert.pool(text, image))))
        return logits, None if answers is None else F.cross_entropy(logits, array_of(answers))


def encoder_state(model: nn.Module) -> dict[str, Any]:
    """The "vilbert.*" entries of a model's state dict: what fine-tuning starts from."""
    return {k: v for k, v in model.state_dict().items() if k.startswith("vilbert.")}
