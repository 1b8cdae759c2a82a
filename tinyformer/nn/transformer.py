"""Transformer building blocks: multi-head attention (self or cross), the MLP, and the block
(pre-LN or post-LN). Names follow nanoGPT / GPT-2 (`c_attn`, `c_proj`, `c_fc`, `ln_1`, `ln_2`),
so weights can be compared with and loaded from those ecosystems. Inputs are batch-first.

PyTorch's own `nn.MultiheadAttention` (sequence-first by default, `in_proj_weight`, a
(query, key, value) call) and `nn.Transformer*` are in `multihead_attention.py` and
`transformer_layers.py`, for code that comes from PyTorch.

Shapes: B batch, T query length, S key length, C width, nh heads, hs = C / nh head size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend
from tinyformer.nn.layers import GELU, Dropout, LayerNorm, Linear
from tinyformer.nn.module import Module
from tinyformer.ops import reshape, split, transpose
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = ["MLP", "Attention", "Block", "combine_masks"]


def combine_masks(attn_mask: Any, key_padding_mask: Any) -> Any:
    """One mask for `scaled_dot_product_attention` from an attention mask (boolean True = attend,
    or additive float) and a key padding mask (B, S), True where a key is padding. Computed where
    the masks are (host masks are moved to the queries' device by the attention op)."""
    if key_padding_mask is None:
        return None if attn_mask is None else array_of(attn_mask)
    pad = array_of(key_padding_mask)
    if pad.ndim != 2 or pad.dtype != np.bool_:
        raise ValueError(
            f"key_padding_mask must be boolean of shape (B, S), got {pad.dtype} {pad.shape}"
        )
    keep = ~pad[:, None, None, :]  # (B, 1, 1, S): broadcasts over heads and queries
    if attn_mask is None:
        return keep
    mask = array_of(attn_mask)
    xp = backend.get_array_module(mask, keep)  # give both masks on one device
    return mask & keep if mask.dtype == np.bool_ else xp.where(keep, mask, -np.inf)


class Attention(Module):
    """Multi-head scaled-dot-product attention on batch-first (B, T, C) inputs.

    Self-attention (`cross=False`) projects x to queries, keys and values with one Linear
    (`c_attn`, C -> 3C); cross-attention projects queries from x (`q_proj`) and keys and values
    from a `context` sequence (`kv_proj`). The heads' outputs are concatenated and mixed by
    `c_proj`.

    Masks, as in PyTorch: `is_causal` lets query t see keys <= t; `key_padding_mask` (B, S) is
    True where a key is padding (to be ignored); `attn_mask` is a boolean (True = attend) or
    additive float mask broadcasting to (B, nh, T, S).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,  # keywords only: PyTorch's third argument is dropout (on the attention weights)
        bias: bool = True,
        dropout: float = 0.0,
        cross: bool = False,
        context_dim: int | None = None,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(
                f"Attention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}"
            )
        self.embed_dim, self.num_heads, self.cross = embed_dim, num_heads, cross
        if cross:
            self.q_proj = Linear(embed_dim, embed_dim, bias)
            self.kv_proj = Linear(context_dim or embed_dim, 2 * embed_dim, bias)
        else:
            self.c_attn = Linear(embed_dim, 3 * embed_dim, bias)
        self.c_proj = Linear(embed_dim, embed_dim, bias)
        self.resid_dropout = Dropout(dropout)

    def _heads(self, x: Tensor) -> Tensor:
        ### BEGIN SOLUTION A3.3 split heads
        b, t, c = x.shape
        x = reshape(x, b, t, self.num_heads, c // self.num_heads)  # (B, T, nh, hs)
        return transpose(x, 1, 2)  # (B, nh, T, hs)
        ### END SOLUTION

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        is_causal: bool = False,
        key_padding_mask: Any = None,
        attn_mask: Any = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, T, C), context (B, S, C_ctx) for cross-attention -> (B, T, C) [, weights
        (B, nh, T, S)]."""
        if x.ndim != 3:  # (T, C) alone is not read as a batch of one
            raise ValueError(f"Attention: x must be (B, T, C), got shape {x.shape}")
        b, t, c = x.shape
        if self.cross:
            if context is None:
                raise ValueError("Attention(cross=True) needs a context sequence")
            q = self.q_proj(x)
            k, v = split(self.kv_proj(context), c, axis=2)  # 2 x (B, S, C)
        else:
            q, k, v = split(self.c_attn(x), c, axis=2)  # 3 x (B, T, C)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)  # (B, nh, T or S, hs)
        mask = combine_masks(attn_mask, key_padding_mask)
        out = F.scaled_dot_product_attention(
            q, k, v, mask, is_causal=is_causal, return_weights=need_weights
        )
        y, weights = out if need_weights else (out, None)
        ### BEGIN SOLUTION A3.3 merge heads
        y = reshape(transpose(y, 1, 2), b, t, c)  # (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C)
        ### END SOLUTION
        y = self.resid_dropout(self.c_proj(y))
        return (y, weights) if need_weights else y


class MLP(Module):
    """Position-wise feed-forward: Linear C -> 4C, GELU, Linear 4C -> C, dropout."""

    def __init__(
        self, embed_dim: int, hidden: int | None = None, bias: bool = True, dropout: float = 0.0
    ) -> None:
        super().__init__()
        self.c_fc = Linear(embed_dim, hidden or 4 * embed_dim, bias)
        self.gelu = GELU()
        self.c_proj = Linear(hidden or 4 * embed_dim, embed_dim, bias)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(Module):
    """Transformer block: self-attention [, cross-attention to a context], MLP, each a residual
    sublayer with a LayerNorm.

    Pre-LN (`norm_first=True`, GPT-2, ViT): x + attn(ln_1(x)) [+ cross_attn(ln_cross(x), c)],
    then x + mlp(ln_2(x)). Normalising before each sublayer keeps the residual path an identity,
    which is what lets deep stacks train without warm-up tricks (Xiong et al., 2020).

    Post-LN (`norm_first=False`, the original Transformer and BERT): ln_1(x + attn(x))
    [, ln_cross(x + cross_attn(x, c))], then ln_2(x + mlp(x)).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        bias: bool = True,
        dropout: float = 0.0,
        cross_attention: bool = False,
        eps: float = 1e-5,
        norm_first: bool = True,
        hidden: int | None = None,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.ln_1 = LayerNorm(embed_dim, eps=eps, bias=bias)
        self.attn = Attention(embed_dim, num_heads, bias=bias, dropout=dropout)
        if cross_attention:
            self.ln_cross = LayerNorm(embed_dim, eps=eps, bias=bias)
            self.cross_attn = Attention(
                embed_dim, num_heads, bias=bias, dropout=dropout, cross=True
            )
        self.ln_2 = LayerNorm(embed_dim, eps=eps, bias=bias)
        self.mlp = MLP(embed_dim, hidden, bias=bias, dropout=dropout)

    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        is_causal: bool = False,
        key_padding_mask: Any = None,
        context_padding_mask: Any = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """x (B, T, C) -> (B, T, C); with need_weights, also the self-attention weights
        (B, nh, T, T), for plots."""
        pre = self.norm_first
        out = self.attn(
            self.ln_1(x) if pre else x, is_causal=is_causal, key_padding_mask=key_padding_mask,
            need_weights=need_weights,
        )  # fmt: skip
        attn, weights = out if need_weights else (out, None)
        x = x + attn if pre else self.ln_1(x + attn)
        if "cross_attn" in self._modules:
            q = self.ln_cross(x) if pre else x
            cross = self.cross_attn(q, context, key_padding_mask=context_padding_mask)
            x = x + cross if pre else self.ln_cross(x + cross)
        x = x + self.mlp(self.ln_2(x)) if pre else self.ln_2(x + self.mlp(x))
        return (x, weights) if need_weights else x
