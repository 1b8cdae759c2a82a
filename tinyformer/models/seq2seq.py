"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

The encoder reads the whole source with bidirectional self-attention. The decoder writes the
target one token at a time: causal self-attention over what it has written so far, then
cross-attention, whose queries come from the decoder and whose keys and values are the
encoder's output ("memory"): that is where each output token looks up the source.

Shapes: B batch, S source length, T target length, C width (d_model), V target vocabulary.

    src (B, S) -> embed * sqrt(C) + positions -> encoder blocks            -> memory (B, S, C)
    tgt_in (B, T) = [BOS] y_1 ... y_{T-1}  (teacher forcing: the true previous tokens)
               -> embed * sqrt(C) + positions -> decoder layers (causal self-attention,
                  cross-attention to memory, MLP) -> Linear tied to the target embedding
                                                                          -> logits (B, T, V)
    trained to predict tgt_out (B, T) = y_1 ... y_T [EOS], label-smoothed.

Decoding: `greedy` takes the likeliest token at each step; `beam_search` keeps the `beam`
likeliest partial outputs, ranked by log-probability with GNMT's length penalty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn, registry
from tinyformer.autograd import no_grad
from tinyformer.models._checks import check_dropout, check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.nn import init
from tinyformer.ops import linear, reshape
from tinyformer.tensor import Tensor

__all__ = ["DecoderLayer", "Seq2SeqConfig", "Transformer", "sinusoidal_positions"]


@dataclass(frozen=True)
class Seq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    max_len: int = 64  # longest source or target sequence
    n_encoder_layers: int = 2
    n_decoder_layers: int = 2
    n_head: int = 4
    d_model: int = 128
    d_ff: int = 512
    dropout: float = 0.1
    positions: str = "sinusoidal"  # "sinusoidal" (the paper's, fixed) or "learned"
    norm: str = "post"  # "post" (the paper's) or "pre"
    pad_id: int = 0  # the same ids in both vocabularies
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self) -> None:
        check_sizes(
            self, "src_vocab_size", "tgt_vocab_size", "max_len", "n_encoder_layers",
            "n_decoder_layers", "n_head", "d_model", "d_ff",
        )  # fmt: skip
        check_dropout(self)
        if self.d_model % self.n_head:
            raise ValueError(f"Seq2SeqConfig: d_model {self.d_model} is not divisible by "
                             f"n_head {self.n_head}")  # fmt: skip
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"Seq2SeqConfig: positions must be 'sinusoidal' or 'learned', "
                             f"got {self.positions!r}")  # fmt: skip
        if self.norm not in ("post", "pre"):
            raise ValueError(f"Seq2SeqConfig: norm must be 'post' or 'pre', got {self.norm!r}")


def sinusoidal_positions(n: int, d: int) -> np.ndarray:
    """(n, d): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)). Each
    pair of columns is a clock of its own frequency, so PE[p + k] is a rotation of PE[p]
    that depends only on k: relative offsets are a linear function attention can pick up."""
    pos = np.arange(n)[:, None]  # (n, 1)
    freq = 10000.0 ** (-np.arange(0, d, 2) / d)  # (d/2,)
    pe = np.zeros((n, d))
    pe[:, 0::2] = np.sin(pos * freq)
    pe[:, 1::2] = np.cos(pos * freq[: d // 2])
    return pe.astype(np.float32)


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention to the memory, MLP; each a residual sublayer
    with its LayerNorm after (post-LN, the paper's) or before (pre-LN) it."""

    def __init__(self, c: int, n_head: int, d_ff: int, dropout: float, norm_first: bool) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = nn.Attention(c, n_head, dropout=dropout)
        self.cross_attn = nn.Attention(c, n_head, dropout=dropout, cross=True)
        self.mlp = nn.MLP(c, d_ff, dropout=dropout)
        self.ln_1, self.ln_2, self.ln_3 = nn.LayerNorm(c), nn.LayerNorm(c), nn.LayerNorm(c)

    def _sublayer(self, x: Tensor, ln: nn.LayerNorm, fn: Any) -> tuple[Tensor, Any]:
        out = fn(ln(x) if self.norm_first else x)
        y, extra = out if isinstance(out, tuple) else (out, None)
        return (x + y if self.norm_first else ln(x + y)), extra

    def forward(
        self, x: Tensor, memory: Tensor, tgt_pad: Any, src_pad: Any, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, T, C), memory (B, S, C) -> (B, T, C), cross-attention weights (B, nh, T, S)
        when need_weights."""
        x, _ = self._sublayer(x, self.ln_1, lambda h: self.self_attn(
            h, is_causal=True, key_padding_mask=tgt_pad))  # fmt: skip
        x, weights = self._sublayer(x, self.ln_2, lambda h: self.cross_attn(
            h, memory, key_padding_mask=src_pad, need_weights=need_weights))  # fmt: skip
        x, _ = self._sublayer(x, self.ln_3, self.mlp)
        return x, weights


class Transformer(nn.Module):
    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = cfg = config
        c, pre = cfg.d_model, cfg.norm == "pre"
        self.src_emb = nn.Embedding(cfg.src_vocab_size, c, padding_idx=cfg.pad_id)
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab_size, c, padding_idx=cfg.pad_id)
        if cfg.positions == "learned":
            self.pos_emb = nn.Embedding(cfg.max_len, c)
        else:  # a fixed table: a buffer, saved with the model but never trained
            self.register_buffer("pos_table", sinusoidal_positions(cfg.max_len, c))
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.ModuleList(
            nn.Block(c, cfg.n_head, dropout=cfg.dropout, norm_first=pre, hidden=cfg.d_ff)
            for _ in range(cfg.n_encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(c, cfg.n_head, cfg.d_ff, cfg.dropout, pre)
            for _ in range(cfg.n_decoder_layers)
        )
        # pre-LN stacks end un-normalised: one LayerNorm on each side, as in GPT-2
        self.ln_enc = nn.LayerNorm(c) if pre else nn.Identity()
        self.ln_dec = nn.LayerNorm(c) if pre else nn.Identity()
        for name, p in self.named_parameters():  # Xavier-like: keeps logits O(1) at the start
            if p.ndim == 2 and "emb" not in name:
                init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))
            elif p.ndim == 2:
                init.normal_(p, std=c**-0.5)
        for emb in (self.src_emb, self.tgt_emb):
            emb.weight.data[cfg.pad_id] = 0

    def _embed(self, emb: nn.Embedding, ids: Any) -> Tensor:
        """ids (B, t) on the model's device -> embeddings + positions (B, t, C)."""
        if ids.ndim != 2 or ids.shape[1] == 0:  # attention over no keys is undefined
            raise ValueError(f"Transformer: token ids must be (B, t) with t >= 1, got shape "
                             f"{ids.shape}")  # fmt: skip
        t = ids.shape[1]
        if t > self.config.max_len:
            raise ValueError(f"Transformer: sequence of length {t} exceeds max_len "
                             f"{self.config.max_len}")  # fmt: skip
        # the paper scales embeddings by sqrt(C) so they are not drowned by the positions
        x = emb(ids) * math.sqrt(self.config.d_model)  # (B, t, C)
        positions = backend.get_array_module(ids).arange(t)  # (t,), where the ids live
        pos = self.pos_emb(positions) if self.config.positions == "learned" else (
            self.pos_table[:t])  # fmt: skip
        return self.drop(x + pos)  # (B, t, C) + (t, C)

    def encode(self, src: Any) -> tuple[Tensor, Any]:
        """src (B, S) -> memory (B, S, C), source padding mask (B, S) (True at padding), both on
        the model's device (host ids move there here)."""
        src = to_device_of(src, self.src_emb.weight)
        src_pad = src == self.config.pad_id
        x = self._embed(self.src_emb, src)
        for block in self.encoder:
            x = block(x, key_padding_mask=src_pad)  # (B, S, C)
        return self.ln_enc(x), src_pad

    def decode(
        self, tgt_in: Any, memory: Tensor, src_pad: Any, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """tgt_in (B, T) -> logits (B, T, V), and each layer's cross-attention weights
        (B, nh, T, S) when need_weights. Host ids move to the model's device here."""
        tgt_in = to_device_of(tgt_in, self.tgt_emb.weight)
        x = self._embed(self.tgt_emb, tgt_in)
        weights = []
        for layer in self.decoder:
            x, w = layer(x, memory, tgt_in == self.config.pad_id, src_pad, need_weights)
            weights += [w] if need_weights else []
        # the output matrix is the target embedding (tied, as in the paper)
        return linear(self.ln_dec(x), self.tgt_emb.weight), weights  # (B, T, V)

    def forward(
        self, src: Any, tgt_in: Any, tgt_out: Any = None, label_smoothing: float = 0.0
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced logits (B, T, V), and the label-smoothed cross-entropy against
        tgt_out (B, T) over non-padding positions."""
        src, tgt_in = array_of(src), array_of(tgt_in)  # moved to the device by encode, decode
        if src.ndim == tgt_in.ndim == 2 and len(src) != len(tgt_in):  # else cross-attention failed
            raise ValueError(f"Transformer: src {src.shape} and tgt_in {tgt_in.shape} must hold "
                             "the same number of sequences")  # fmt: skip
        memory, src_pad = self.encode(src)
        logits, _ = self.decode(tgt_in, memory, src_pad)
        if tgt_out is None:
            return logits, None
        b, t, v = logits.shape
        tgt_out = array_of(tgt_out)  # left where it is: the loss checks it there, then moves it
        if tgt_out.shape != (b, t):
            raise ValueError(f"Transformer: tgt_out must have tgt_in's shape {(b, t)}, got "
                             f"{tgt_out.shape}")  # fmt: skip
        loss = F.cross_entropy(
            reshape(logits, b * t, v),
            tgt_out.reshape(b * t),
            ignore_index=self.config.pad_id,
            label_smoothing=label_smoothing,
        )
        return logits, loss  # fmt: skip

    @no_grad()
    def greedy(self, src: Any, max_len: int) -> np.ndarray:
        """The likeliest token at every step: (B, <= max_len) ids, EOS and after as padding."""
        return self.beam_search(src, max_len, beam=1)

    @no_grad()
    def beam_search(
        self, src: Any, max_len: int, beam: int = 4, length_penalty: float = 0.6
    ) -> np.ndarray:
        """Keep the `beam` best partial outputs per source; a finished one (EOS) keeps its
        score. Final ranking: log p / ((5 + length) / 6)^length_penalty (Wu et al., 2016), so
        that short outputs do not win just by having fewer terms. -> (B, <= max_len) ids, on
        the host wherever the model is: the search's bookkeeping runs there."""
        if beam < 1 or max_len < 0:
            raise ValueError(f"beam_search: need beam >= 1 and max_len >= 0, got {beam}, {max_len}")
        cfg, was_training = self.config, self.training
        if max_len > cfg.max_len:  # the last step decodes [BOS] + max_len - 1 tokens
            raise ValueError(f"beam_search: max_len {max_len} is longer than the model's max_len "
                             f"{cfg.max_len}")  # fmt: skip
        self.eval()
        try:
            memory, src_pad = self.encode(src)  # on the model's device
            b, xp = src_pad.shape[0], backend.get_array_module(src_pad)
            # every source repeated `beam` times: rows b*beam .. b*beam + beam - 1
            memory = Tensor(xp.repeat(memory.data, beam, axis=0))  # (B*K, S, C)
            src_pad = xp.repeat(src_pad, beam, axis=0)
            seqs = np.full((b * beam, 1), cfg.bos_id, np.int64)  # (B*K, 1)
            scores = np.tile([0.0] + [-np.inf] * (beam - 1), b)  # one live beam at the start
            done = np.zeros(b * beam, bool)
            for _ in range(max_len):
                logits, _ = self.decode(seqs, memory, src_pad)  # the host seqs move there
                # one read-back per step: the ranking below is on the host
                last = backend.to_host(logits.data[:, -1]).astype(np.float64)  # (B*K, V)
                logp = registry.call("log_softmax.forward", last)
                v = logp.shape[1]
                logp[done] = -np.inf  # a finished beam extends only with padding, for free
                logp[done, cfg.pad_id] = 0.0
                total = (scores[:, None] + logp).reshape(b, beam * v)  # (B, K*V)
                best = np.argsort(-total, axis=1, kind="stable")[:, :beam]  # (B, K)
                parent = (np.arange(b)[:, None] * beam + best // v).reshape(-1)
                token = (best % v).reshape(-1)
                seqs = np.concatenate([seqs[parent], token[:, None]], axis=1)
                scores = np.take_along_axis(total, best, axis=1).reshape(-1)
                done = done[parent] | (token == cfg.eos_id)
                if done.all():
                    break
            lengths = (seqs[:, 1:] != cfg.pad_id).sum(axis=1)
            ranked = scores / ((5 + lengths) / 6) ** length_penalty
            pick = ranked.reshape(b, beam).argmax(axis=1) + np.arange(b) * beam
            out = seqs[pick, 1:]
            out[np.cumsum(out == cfg.eos_id, axis=1) > 0] = cfg.pad_id  # drop EOS and after
            return out
        finally:
            self.train(was_training)
