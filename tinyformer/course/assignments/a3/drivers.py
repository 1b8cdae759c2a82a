"""A3.3's module driven by plain data: what the grader's child runs for its tests.

`Attention` holds parameters, so it cannot cross the grader's pipe whole. These
functions build one in the child from a seed, run the student's code on arrays the grader
sends, and return arrays (the output, and the projections' results and weights that the
grader needs to recompute it one head at a time), which the grader judges
(`checks.py`, beside this file). They are no part of the assignment and hold no answer.
"""

from __future__ import annotations

import numpy as np

import tinyformer as tf

__all__ = ["attention_module", "heads"]


def heads(embed_dim: int, num_heads: int, x: np.ndarray) -> np.ndarray:
    """`Attention(embed_dim, num_heads)._heads(x)`, as an array."""
    return np.asarray(tf.nn.Attention(embed_dim, num_heads)._heads(tf.Tensor(x)).data)


def attention_module(
    embed_dim: int,
    num_heads: int,
    seed: int,
    x: np.ndarray,
    context: np.ndarray | None = None,
    context_dim: int | None = None,
    is_causal: bool = False,
):
    """A module made after `tf.manual_seed(seed)` (cross-attention when `context` is given)
    on x -> (y, q, k, v, c_proj.weight, c_proj.bias): q, k, v from its own projections, for
    every head at once."""
    tf.manual_seed(seed)
    cross = context is not None
    mha = tf.nn.Attention(embed_dim, num_heads, cross=cross, context_dim=context_dim)
    with tf.no_grad():
        y = (
            mha(tf.Tensor(x), tf.Tensor(context), is_causal=is_causal)
            if cross
            else mha(tf.Tensor(x), is_causal=is_causal)
        )
        if cross:
            q = mha.q_proj(tf.Tensor(x)).data
            k, v = np.split(mha.kv_proj(tf.Tensor(context)).data, 2, axis=-1)
        else:
            q, k, v = np.split(mha.c_attn(tf.Tensor(x)).data, 3, axis=-1)
    bias = mha.c_proj.bias.data if mha.c_proj.bias is not None else np.zeros(embed_dim)
    return y.data, q, k, v, mha.c_proj.weight.data, bias
