"""PyTorch's `nn.MultiheadAttention`: its arguments, its parameter names and shapes (so its
state dicts load), its sequence-first layout by default and its masks. With need_weights=False
(as the Transformer layers call it) the attention is `F.scaled_dot_product_attention`, the op
every model here uses; with need_weights (PyTorch's default) it is spelled out as PyTorch's
(scores, softmax, dropout, weights @ v), so that the weights it returns carry gradients.

(The attention inside this repository's own models is `nn.Attention`, with nanoGPT's names
`c_attn`, `c_proj` and batch-first (B, T, C) inputs.)

Shapes: L query length, S key length, N batch, E embed_dim, nh heads, hd = E / nh head size.
    query (L, N, E), key (S, N, kdim), value (S, N, vdim) -> (L, N, E)   [batch_first: N first]
    unbatched: (L, E), (S, kdim), (S, vdim) -> (L, E)

Parameters, as PyTorch's:
    in_proj_weight (3E, E)     rows [W_q; W_k; W_v], when kdim == vdim == E
    q_proj_weight (E, E), k_proj_weight (E, kdim), v_proj_weight (E, vdim)   otherwise
    in_proj_bias (3E,)         [b_q; b_k; b_v]   (with bias=True)
    out_proj.weight (E, E), out_proj.bias (E,)

Masks, as PyTorch's (note: the opposite of `scaled_dot_product_attention`'s booleans):
    attn_mask (L, S) or (N nh, L, S): boolean True = NOT allowed to attend, or a float mask
        added to the scores;
    key_padding_mask (N, S) (or (S,) unbatched): boolean True = this key is padding, or float
        added to the scores;
    is_causal: a hint that attn_mask is the causal mask; as in PyTorch it needs attn_mask.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tinyformer.nn.functional as F
from tinyformer import backend
from tinyformer.nn import init
from tinyformer.nn.layers import Linear
from tinyformer.nn.module import Module, Parameter
from tinyformer.ops import cat, expand, matmul, reshape, squeeze, transpose, unsqueeze
from tinyformer.ops._util import array_of
from tinyformer.tensor import Tensor

__all__ = ["MultiheadAttention"]


def _additive(mask: Any, name: str, like: Tensor) -> Any:
    """A boolean (True = masked out) or float mask as a float one to add to the scores, in
    like's dtype and on its device."""
    if mask is None:
        return None
    m = backend.to_device(array_of(mask), backend.device_of(like.data))
    if m.dtype == np.bool_:
        xp = backend.get_array_module(m)
        return xp.where(m, -np.inf, 0.0).astype(like.dtype)
    if m.dtype.kind != "f":
        raise TypeError(f"MultiheadAttention: {name} must be boolean or floating, got {m.dtype}")
    return m.astype(like.dtype, copy=False)


class MultiheadAttention(Module):
    """Multi-head attention as `torch.nn.MultiheadAttention` (same arguments, same order).

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None); the weights
    (N, L, S), or (N, nh, L, S) with average_attn_weights=False, are taken after dropout and
    carry gradients, as PyTorch's.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        dtype: Any = np.float32,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"MultiheadAttention: embed_dim and num_heads must be greater than 0, got "
                f"embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        if embed_dim % num_heads:  # AssertionError, as PyTorch's
            raise AssertionError(
                f"MultiheadAttention: embed_dim must be divisible by num_heads, got "
                f"{embed_dim} and {num_heads}"
            )
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        e = embed_dim

        def weight(*shape: int) -> Parameter:
            return init.xavier_uniform_(Parameter(np.zeros(shape, dtype)))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = weight(3 * e, e)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = weight(e, e)
            self.k_proj_weight = weight(e, self.kdim)
            self.v_proj_weight = weight(e, self.vdim)
        bias_param = Parameter(np.zeros(3 * e, dtype)) if bias else None
        self.register_parameter("in_proj_bias", bias_param)
        self.out_proj = Linear(e, e, bias, dtype)
        if bias:
            init.zeros_(self.out_proj.bias)
        if add_bias_kv:  # one more key and value, learned, that every query can attend to
            self.bias_k = init.xavier_normal_(Parameter(np.zeros((1, 1, e), dtype)))
            self.bias_v = init.xavier_normal_(Parameter(np.zeros((1, 1, e), dtype)))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn  # one more key and value of zeros

    def _projections(self) -> list[tuple[Tensor, Tensor | None]]:
        """(weight, bias) of the query, key and value projections."""
        e, b = self.embed_dim, self.in_proj_bias
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            weights = [w[:e], w[e : 2 * e], w[2 * e :]]
        else:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        biases = [None] * 3 if b is None else [b[:e], b[e : 2 * e], b[2 * e :]]
        return list(zip(weights, biases, strict=True))

    def _extra_keys(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """k, v (N, S, E) with bias_k and bias_v, then zeros, appended as PyTorch's
        add_bias_kv and add_zero_attn do."""
        n, _, e = k.shape
        if self.bias_k is not None:
            k = cat([k, expand(self.bias_k, n, 1, e)], axis=1)
            v = cat([v, expand(self.bias_v, n, 1, e)], axis=1)
        if self.add_zero_attn:
            xp = backend.get_array_module(k.data)
            zeros = Tensor(xp.zeros((n, 1, e), k.dtype))
            k, v = cat([k, zeros], axis=1), cat([v, zeros], axis=1)
        return k, v

    @staticmethod
    def _attend_with_weights(q: Tensor, k: Tensor, v: Tensor, mask: Any, dropout_p: float):
        """Attention spelled out, as PyTorch's need_weights path: the weights (N, nh, L, S)
        are returned after dropout and carry gradients."""
        scores = matmul(q, transpose(k, -2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        if mask is not None:
            scores = scores + Tensor(mask)
        weights = F.softmax(scores, -1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, dropout_p, True)
        return matmul(weights, v), weights

    def _heads(self, x: Tensor) -> Tensor:
        n, t, _ = x.shape
        return transpose(reshape(x, n, t, self.num_heads, self.head_dim), 1, 2)  # (N, nh, T, hd)

    def _mask(self, attn_mask: Any, key_padding_mask: Any, n: int, l: int, s: int, like: Tensor):
        """One additive float mask broadcasting to (N, nh, L, S), or None."""
        mask = _additive(attn_mask, "attn_mask", like)
        if mask is not None:
            if mask.shape == (l, s):
                pass
            elif mask.shape == (n * self.num_heads, l, s):
                mask = mask.reshape(n, self.num_heads, l, s)
            else:
                raise RuntimeError(
                    f"MultiheadAttention: attn_mask of shape {tuple(mask.shape)} should be "
                    f"({l}, {s}) or ({n * self.num_heads}, {l}, {s})"
                )
        pad = _additive(key_padding_mask, "key_padding_mask", like)
        if pad is not None:
            if pad.shape != (n, s):
                raise RuntimeError(
                    f"MultiheadAttention: key_padding_mask of shape {tuple(pad.shape)} should "
                    f"be ({n}, {s})"
                )
            pad = pad[:, None, None, :]  # (N, 1, 1, S)
            mask = pad if mask is None else mask + pad
        return mask

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        if key is None or value is None:
            raise TypeError(
                "MultiheadAttention.forward takes (query, key, value) as PyTorch's: for "
                "self-attention pass x three times; nn.Attention takes one (B, T, C) input"
            )
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "MultiheadAttention: is_causal is a hint that attn_mask is causal and needs "
                "attn_mask; make one with nn.Transformer.generate_square_subsequent_mask"
            )
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(
                f"MultiheadAttention: query, key and value must all be 3-D (batched) or 2-D "
                f"(unbatched), got shapes {query.shape}, {key.shape}, {value.shape}"
            )
        if not batched:  # one sequence: a batch of one
            query, key, value = (unsqueeze(t, 0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = array_of(key_padding_mask)[None]
        elif not self.batch_first:  # (L, N, E) -> (N, L, E)
            query, key, value = (transpose(t, 0, 1) for t in (query, key, value))
        n, l, _ = query.shape
        s = key.shape[1]
        for name, t, dim in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):  # fmt: skip
            if t.shape[-1] != dim or t.shape[0] != n:
                raise ValueError(
                    f"MultiheadAttention: {name} of shape {t.shape} (batch first) does not fit "
                    f"batch {n} and features {dim}"
                )
        (wq, bq), (wk, bk), (wv, bv) = self._projections()
        q = F.linear(query, wq, bq)  # (N, L, E)
        k, v = self._extra_keys(F.linear(key, wk, bk), F.linear(value, wv, bv))  # (N, S', E)
        mask = self._mask(attn_mask, key_padding_mask, n, l, s, q)
        if mask is not None and k.shape[1] > s:  # the extra keys are never masked
            xp = backend.get_array_module(mask)
            extra = [(0, 0)] * (mask.ndim - 1) + [(0, k.shape[1] - s)]
            mask = xp.pad(mask, extra)
        q, k, v = self._heads(q), self._heads(k), self._heads(v)  # (N, nh, L or S', hd)
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            y, weights = self._attend_with_weights(q, k, v, mask, dropout_p)
        else:
            y, weights = F.scaled_dot_product_attention(q, k, v, mask, dropout_p), None
        y = reshape(transpose(y, 1, 2), n, l, self.embed_dim)  # (N, nh, L, hd) -> (N, L, E)
        y = self.out_proj(y)
        if not batched:
            y = squeeze(y, 0)
        elif not self.batch_first:
            y = transpose(y, 0, 1)  # back to (L, N, E)
        if weights is not None:
            if average_attn_weights:
                weights = weights.mean(axis=1)  # (N, L, S)
            if not batched:
                weights = squeeze(weights, 0)
        return y, weights

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, dropout={self.dropout}"
