"""RNNsearch: the RNN encoder-decoder with additive attention of Bahdanau, Cho and Bengio,
"Neural Machine Translation by Jointly Learning to Align and Translate" (ICLR 2015).

Before it, an encoder RNN squeezed the whole source into its last state, one fixed-size vector
for the decoder to unpack (Sutskever et al., 2014; Cho et al., 2014). Here the decoder looks
back at every source position at every step, through a small network that scores how well
each source annotation h_j fits its state s_{i-1}:

    e_ij = v^T tanh(W s_{i-1} + U h_j)        the additive ("concat") score
    a_ij = softmax_j(e_ij)                    over the real source positions (padding masked)
    c_i  = sum_j a_ij h_j                     the context vector
    s_i  = GRU([E y_{i-1}; c_i], s_{i-1})     the decoder's state
    logits_i = Linear([s_i; c_i; E y_{i-1}])  (the paper adds a maxout layer here)

Shapes: B batch, S source length, T target length, E embedding width, H encoder width per
direction (annotations are 2H: forward and backward states side by side), Hd decoder width,
A attention width, V target vocabulary.

    src (B, S) -> embed -> bidirectional GRU -> annotations h (B, S, 2H); U h (B, S, A) once
    s_0 = tanh(W_s h_1^backward)             the backward GRU's state after reading the source
    tgt_in (B, T) = [BOS] y_1 ... y_{T-1}    teacher forcing in training; greedy decoding feeds
                                             back its own argmax
    -> T decoder steps -> logits (B, T, V), alignment weights a (B, T, S)

Parameter names as in PyTorch's seq2seq tutorial (Wa, Ua, Va) and torch.nn.GRU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend, nn
from tinyformer.autograd import no_grad
from tinyformer.models._checks import check_sizes
from tinyformer.models._inputs import array_of, to_device_of
from tinyformer.ops import cat, masked_fill, matmul, reshape, stack
from tinyformer.tensor import Tensor

__all__ = ["AdditiveAttention", "BahdanauConfig", "Memory", "RNNSearch"]


@dataclass(frozen=True)
class BahdanauConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    emb: int = 64  # E: character embedding width, source and target
    hidden: int = 128  # H: encoder GRU width per direction (annotations are 2H)
    dec_hidden: int = 128  # Hd: decoder GRU width
    attn: int = 128  # A: width of the additive score's hidden layer
    pad_id: int = 0  # the same ids in both vocabularies
    bos_id: int = 1
    eos_id: int = 2

    def __post_init__(self) -> None:
        check_sizes(self, "src_vocab_size", "tgt_vocab_size", "emb", "hidden", "dec_hidden",
                    "attn")  # fmt: skip


class AdditiveAttention(nn.Module):
    """e_j = Va^T tanh(Wa s + Ua h_j), softmax over the unmasked j, context = sum_j a_j h_j."""

    def __init__(self, query_size: int, key_size: int, attn_size: int) -> None:
        super().__init__()
        self.Wa = nn.Linear(query_size, attn_size, bias=False)
        self.Ua = nn.Linear(key_size, attn_size)  # its bias is the score's only bias
        self.Va = nn.Linear(attn_size, 1, bias=False)

    def score(self, s: Tensor, keys: Tensor) -> Tensor:
        """s (B, Hd), keys = Ua h (B, S, A) -> e (B, S). The keys do not depend on the step:
        the decoder computes them once per source, and each step adds one (B, A) query."""
        q = self.Wa(s)  # (B, A)
        e = self.Va(F.tanh(reshape(q, q.shape[0], 1, q.shape[1]) + keys))  # (B, S, 1)
        return reshape(e, e.shape[0], e.shape[1])

    def forward(self, s: Tensor, keys: Tensor, values: Tensor, pad: Any) -> tuple[Tensor, Tensor]:
        """s (B, Hd), keys (B, S, A), values h (B, S, 2H), pad (B, S) True at padding
        -> context (B, 2H), weights (B, S) summing to 1 over the real positions."""
        e = masked_fill(self.score(s, keys), pad, -np.inf)  # padding gets exp(-inf) = 0
        a = F.softmax(e, axis=-1)  # (B, S)
        b, n = a.shape
        context = matmul(reshape(a, b, 1, n), values)  # (B, 1, S) @ (B, S, 2H) -> (B, 1, 2H)
        return reshape(context, b, values.shape[2]), a


class Memory(NamedTuple):
    """What the encoder leaves for the decoder."""

    annotations: Tensor  # h (B, S, 2H)
    keys: Tensor  # Ua h (B, S, A)
    s0: Tensor  # the decoder's first state (B, Hd)
    pad: Any  # (B, S) True at source padding, on the model's device


class RNNSearch(nn.Module):
    def __init__(self, config: BahdanauConfig) -> None:
        super().__init__()
        self.config = cfg = config
        self.src_emb = nn.Embedding(cfg.src_vocab_size, cfg.emb, padding_idx=cfg.pad_id)
        self.encoder = nn.GRU(cfg.emb, cfg.hidden, batch_first=True, bidirectional=True)
        self.init_proj = nn.Linear(cfg.hidden, cfg.dec_hidden)  # W_s
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab_size, cfg.emb, padding_idx=cfg.pad_id)
        self.attn = AdditiveAttention(cfg.dec_hidden, 2 * cfg.hidden, cfg.attn)
        self.decoder = nn.GRUCell(cfg.emb + 2 * cfg.hidden, cfg.dec_hidden)
        self.out = nn.Linear(cfg.dec_hidden + 2 * cfg.hidden + cfg.emb, cfg.tgt_vocab_size)

    def encode(self, src: Any) -> Memory:
        """src (B, S) ids, padded at the end -> Memory (host ids move to the model's device)."""
        src = array_of(src)
        host = backend.to_host(src)  # lengths are host bookkeeping; ids arrive from the host
        if host.ndim != 2 or host.shape[1] == 0:
            raise ValueError(f"RNNSearch: src must be (B, S) with S >= 1, got shape {src.shape}")
        real = host != self.config.pad_id
        lengths = real.sum(axis=1)
        bad = (lengths == 0) | (real != (np.arange(host.shape[1]) < lengths[:, None])).any(1)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ValueError(f"RNNSearch: every source must be >= 1 tokens followed by padding "
                             f"only; row {row} is {host[row].tolist()}")  # fmt: skip
        src = to_device_of(src, self.src_emb.weight)
        # lengths: the backward GRU starts at each source's last real character
        h, h_n = self.encoder(self.src_emb(src), lengths=lengths)  # (B, S, 2H), (2, B, H)
        s0 = F.tanh(self.init_proj(h_n[1]))  # (B, Hd), from the backward direction
        return Memory(h, self.attn.Ua(h), s0, src == self.config.pad_id)

    def step(self, y_emb: Tensor, s: Tensor, memory: Memory) -> tuple[Tensor, Tensor, Tensor]:
        """One decoder step: y_emb = E y_{i-1} (B, E), s = s_{i-1} (B, Hd)
        -> logits (B, V), s_i (B, Hd), alignment weights (B, S)."""
        context, a = self.attn(s, memory.keys, memory.annotations, memory.pad)  # (B, 2H), (B, S)
        s = self.decoder(cat([y_emb, context], axis=-1), s)
        return self.out(cat([s, context, y_emb], axis=-1)), s, a

    def decode(self, tgt_in: Any, memory: Memory) -> tuple[Tensor, Tensor]:
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V), alignment weights (B, T, S)."""
        tgt_in = to_device_of(tgt_in, self.tgt_emb.weight)
        if tgt_in.ndim != 2 or tgt_in.shape[0] != memory.s0.shape[0] or tgt_in.shape[1] == 0:
            raise ValueError(f"RNNSearch: tgt_in must be ({memory.s0.shape[0]}, T) with T >= 1, "
                             f"the batch of src, got shape {tgt_in.shape}")  # fmt: skip
        emb = self.tgt_emb(tgt_in)  # (B, T, E)
        s, logits, weights = memory.s0, [], []
        for y_emb in emb.split(1, axis=1):  # one split node: backward writes emb's grad once
            z, s, a = self.step(y_emb.squeeze(1), s, memory)
            logits.append(z)
            weights.append(a)
        return stack(logits, axis=1), stack(weights, axis=1)

    def forward(
        self, src: Any, tgt_in: Any, tgt_out: Any = None, label_smoothing: float = 0.0
    ) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced logits (B, T, V), and the (label-smoothed) cross-entropy against
        tgt_out (B, T) over non-padding positions."""
        logits, _ = self.decode(tgt_in, self.encode(src))
        if tgt_out is None:
            return logits, None
        b, t, v = logits.shape
        tgt_out = array_of(tgt_out)
        if tgt_out.shape != (b, t):
            raise ValueError(f"RNNSearch: tgt_out must have tgt_in's shape {(b, t)}, got "
                             f"{tgt_out.shape}")  # fmt: skip
        loss = F.cross_entropy(
            reshape(logits, b * t, v), tgt_out.reshape(b * t), ignore_index=self.config.pad_id,
            label_smoothing=label_smoothing,
        )  # fmt: skip
        return logits, loss

    @no_grad()
    def beam_search(self, src: Any, max_len: int, beam: int = 1) -> np.ndarray:
        """Greedy decoding's ids, under the Transformer's name for decoding (this model has no
        beam search: `beam` must be 1)."""
        if beam != 1:
            raise ValueError(f"RNNSearch decodes greedily only (beam=1), got beam={beam}")
        return self.greedy(src, max_len)[0]

    def greedy(self, src: Any, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """Feed back the likeliest token at every step -> ids (B, <= max_len) with EOS and
        after as padding, and the alignment weights (B, steps, S) of every step (the last row
        chose EOS), both on the host."""
        if max_len < 1:
            raise ValueError(f"RNNSearch.greedy: max_len must be >= 1, got {max_len}")
        cfg, was_training = self.config, self.training
        self.eval()
        try:
            memory = self.encode(src)
            b = memory.s0.shape[0]
            y = to_device_of(np.full(b, cfg.bos_id), self.tgt_emb.weight)
            s, ids, weights = memory.s0, [], []
            done = np.zeros(b, bool)
            for _ in range(max_len):
                z, s, a = self.step(self.tgt_emb(y), s, memory)
                y = z.data.argmax(axis=-1)  # stays on the device: the next step's input
                ids.append(backend.to_host(y))  # one small read-back per step, to stop early
                weights.append(backend.to_host(a.data))
                done |= ids[-1] == cfg.eos_id
                if done.all():
                    break
            out = np.stack(ids, axis=1)
            out[np.cumsum(out == cfg.eos_id, axis=1) > 0] = cfg.pad_id  # drop EOS and after
            return out, np.stack(weights, axis=1)
        finally:
            self.train(was_training)
