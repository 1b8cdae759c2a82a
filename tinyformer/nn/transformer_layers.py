"""PyTorch's transformer modules: `TransformerEncoderLayer`, `TransformerEncoder`,
`TransformerDecoderLayer`, `TransformerDecoder` and `Transformer`, with PyTorch's arguments,
defaults, submodule names (`self_attn`, `multihead_attn`, `linear1`, `linear2`, `norm1`...,
`dropout1`...) and mask arguments, so that PyTorch's state dicts load. The attention is
`nn.MultiheadAttention` (PyTorch's), whose core is `F.scaled_dot_product_attention`.

Shapes: S source length, T target length, N batch, E d_model. Inputs are (S, N, E) and
(T, N, E), or (N, S, E) and (N, T, E) with batch_first=True, or unbatched (S, E), (T, E).

Post-LN (norm_first=False, the default, as in "Attention Is All You Need"):
    x = norm1(x + self_attn(x));  [x = norm2(x + cross_attn(x, memory))];  x = normK(x + ff(x))
Pre-LN (norm_first=True):
    x = x + self_attn(norm1(x));  [x = x + cross_attn(norm2(x), memory)];  x = x + ff(normK(x))
with ff(x) = linear2(dropout(activation(linear1(x)))), each sublayer's output dropped out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer.nn import init
from tinyformer.nn.layers import Dropout, LayerNorm, Linear, ModuleList
from tinyformer.nn.module import Module
from tinyformer.nn.multihead_attention import MultiheadAttention
from tinyformer.ops import triu
from tinyformer.tensor import Tensor

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

Activation = str | Callable[[Tensor], Tensor]


def _activation(activation: Activation) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class _Layer(Module):
    """What encoder and decoder layers share: the feed-forward sublayer and the norms."""

    def _build(self, d_model, nhead, dim_feedforward, dropout, activation, eps, batch_first,
               norm_first, bias, dtype, norms: int) -> None:  # fmt: skip
        """Submodules in PyTorch's order (the order of parameters() and of state_dict)."""
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype
        )
        if norms == 3:  # a decoder layer: attention to the encoder's output
            self.multihead_attn = MultiheadAttention(
                d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype
            )
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype)
        self.norm_first = norm_first
        for i in range(1, norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps, bias=bias, dtype=dtype))
        for i in range(1, norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation)
        self.batch_first = batch_first

    def _sa_block(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        x = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=is_causal,
        )[0]  # fmt: skip
        return self.dropout1(x)

    def _ff(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class TransformerEncoderLayer(_Layer):
    """Self-attention and a feed-forward network, each a residual sublayer with a LayerNorm,
    as `torch.nn.TransformerEncoderLayer`."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype, norms=2)  # fmt: skip

    def forward(
        self,
        src: Tensor,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self.dropout2(self._ff(self.norm2(x)))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self.dropout2(self._ff(x)))


class TransformerDecoderLayer(_Layer):
    """Self-attention, attention to the encoder's output (`memory`) and a feed-forward
    network, each a residual sublayer with a LayerNorm, as `torch.nn.TransformerDecoderLayer`."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        self._build(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                    batch_first, norm_first, bias, dtype, norms=3)  # fmt: skip

    def _mha_block(self, x: Tensor, memory: Tensor, mask: Any, padding: Any, causal: bool):
        x = self.multihead_attn(
            x, memory, memory, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=causal,
        )[0]  # fmt: skip
        return self.dropout2(x)

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        self_masks = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        memory_masks = (memory_mask, memory_key_padding_mask, memory_is_causal)
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), *self_masks)
            x = x + self._mha_block(self.norm2(x), memory, *memory_masks)
            return x + self.dropout3(self._ff(self.norm3(x)))
        x = self.norm1(x + self._sa_block(x, *self_masks))
        x = self.norm2(x + self._mha_block(x, memory, *memory_masks))
        return self.norm3(x + self.dropout3(self._ff(x)))


class TransformerEncoder(Module):
    """`num_layers` deep copies of `encoder_layer` (`layers.0`, `layers.1`, ...), then `norm`
    if given, as `torch.nn.TransformerEncoder`."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,  # PyTorch's fast path; nothing to enable here
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Tensor,
        mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """`num_layers` deep copies of `decoder_layer`, then `norm` if given, as
    `torch.nn.TransformerDecoder`."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None
    ) -> None:
        super().__init__()
        self.layers = ModuleList(copy.deepcopy(decoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal,
            )  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder Transformer (Vaswani et al., 2017) as `torch.nn.Transformer`:
    `encoder` and `decoder` stacks, each ending in a LayerNorm; every weight matrix
    Xavier-uniform initialised, as PyTorch's."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Activation = "relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias, dtype)  # fmt: skip
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
            layer = TransformerEncoderLayer(*args)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            norm = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
            layer = TransformerDecoderLayer(*args)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        """src (S, N, E), tgt (T, N, E) (batch first: N first; unbatched: no N) -> (T, N, E)."""
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(
            src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal
        )
        return self.decoder(
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal,
        )  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above (future positions), to
        add to attention scores, as PyTorch's."""
        full = Tensor(np.full((sz, sz), -np.inf, dtype or np.float32), device=device)
        return triu(full, 1)
