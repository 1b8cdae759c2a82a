# ---
# jupyter:
#   jupytext:
#     formats: py:percent,ipynb
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 4. Attention, step by step
#
# The lecture example: a four-token sentence, "the cat sat down". Each token is a vector.
# Attention lets every token build a new vector as a weighted mix of the others' vectors, with
# weights that depend on how well its **query** matches their **keys**. We go through it one
# step at a time, in NumPy, and at the end check that tinyformer's
# `F.scaled_dot_product_attention` and `nn.Attention` compute exactly the same thing.

# %%
import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn, registry, viz
from tinyformer.ops.softmax import softmax_forward as softmax  # writing it is assignment A2.1

tokens = ["the", "cat", "sat", "down"]
T, C = len(tokens), 8  # 4 tokens, each an 8-dimensional vector
rng = np.random.default_rng(0)
x = rng.standard_normal((T, C))  # (T, C): in a real model, token + position embeddings

# %% [markdown]
# ## Queries, keys and values
#
# Three learned matrices map each token vector to a query ("what am I looking for?"), a key
# ("what do I contain?") and a value ("what do I hand over if chosen?").

# %%
d_k = C
W_q, W_k, W_v = (rng.standard_normal((C, d_k)) / np.sqrt(C) for _ in range(3))
Q, K, V = x @ W_q, x @ W_k, x @ W_v  # each (T, d_k)
print(Q.shape, K.shape, V.shape)

# %% [markdown]
# ## The score grid
#
# Score (i, j) says how much token i's query matches token j's key: a dot product. All of them
# at once are one matrix product, a T x T grid.

# %%
scores = Q @ K.T  # (T, T)


def show(grid, title, ax=None, fmt="{:.2f}"):
    ax = ax or plt.gca()
    ax.imshow(grid, cmap="viridis")
    ax.set_xticks(range(T), tokens)
    ax.set_yticks(range(T), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.set_title(title)
    for i in range(T):
        for j in range(T):
            value = grid[i, j]
            ax.text(j, i, "-inf" if np.isneginf(value) else fmt.format(value),
                    ha="center", va="center", color="w", fontsize=8)  # fmt: skip


show(scores, "raw scores Q Kᵀ")
plt.show()

# %% [markdown]
# ## Scaling by sqrt(d_k)
#
# A dot product of two random d_k-dimensional vectors has variance d_k. Large scores push
# softmax into saturation (one weight near 1, the rest near 0, tiny gradients). Dividing by
# sqrt(d_k) brings the variance back to 1. Check it on many random vectors:

# %%
a, b = rng.standard_normal((2, 10_000, 64))
dots = (a * b).sum(-1)
print(f"variance of q.k for d_k=64: {dots.var():.1f}; after / sqrt(64): {(dots / 8).var():.2f}")
scaled = scores / np.sqrt(d_k)

# %% [markdown]
# ## Softmax: scores to weights
#
# Each row becomes a probability distribution over the keys: exponentiate and normalise.
# (Subtracting the row maximum first changes nothing mathematically and avoids overflow.)

# %%
weights = softmax(scaled)  # the library's NumPy softmax (imported above), over the last axis
print("rows sum to", weights.sum(axis=-1))
out = weights @ V  # (T, d_k): each row a weighted mix of the value vectors

# %% [markdown]
# ## The look-ahead mask
#
# A language model predicts the next token, so token i must not see tokens after it. We add
# -inf above the diagonal before the softmax: exp(-inf) = 0, so those weights vanish and each
# row still sums to 1 over the tokens it may see.

# %%
mask = np.triu(np.full((T, T), -np.inf), k=1)  # 0 on and below the diagonal, -inf above
causal_weights = softmax(scaled + mask)
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
show(scaled + mask, "scaled scores + mask", axes[0])
show(causal_weights, "causal attention weights", axes[1])
plt.tight_layout()
plt.show()
causal_out = causal_weights @ V

# %% [markdown]
# tinyformer's fused op does scale, mask, softmax and the weighted sum in one call, and its
# backward is checked against finite differences like every other op:

# %%
y = F.scaled_dot_product_attention(tf.tensor(Q), tf.tensor(K), tf.tensor(V), is_causal=True)
print("max difference from the step-by-step version:", np.abs(y.numpy() - causal_out).max())

# %% [markdown]
# ## Backward, by hand
#
# Training needs the gradients of the loss with respect to Q, K and V. Going back through the
# forward, one step at a time (S the scaled scores, P the weights, y = P V): first
# $g_V = P^\top g_y$ and $g_P = g_y V^\top$; then the softmax backward (assignment A2's), row
# by row, from $g_P$ to $g_S$; then through the product $S = Q K^\top / \sqrt{d_k}$.
#
# **Exercise 4.1** — write the backward of causal attention for one head: from the upstream
# gradient `gy` (T, d_k) = dL/d`causal_out`, the weights `causal_weights` (T, T) and Q, K, V
# (each (T, d_k)), compute `gQ`, `gK`, `gV`, each (T, d_k). The masked entries need no special
# case. The check cell runs tinyformer's attention backward on the same inputs: your relative
# errors should be below 1e-10 (both are float64).

# %%
gy = np.random.default_rng(1).standard_normal((T, d_k))  # dL/d causal_out, from above
# Exercise 4.1: gQ, gK, gV (T, d_k) from gy, causal_weights, Q, K and V.
### BEGIN SOLUTION A3.1 attention backward, in the tutorial
gV = causal_weights.T @ gy  # (T, d_k)
gP = gy @ V.T  # (T, T)
gS = causal_weights * (gP - (gP * causal_weights).sum(axis=-1, keepdims=True))  # (T, T)
gQ = gS @ K / np.sqrt(d_k)  # (T, d_k)
gK = gS.T @ Q / np.sqrt(d_k)  # (T, d_k)
### END SOLUTION
print(gQ.shape, gK.shape, gV.shape)

# %%
# Check Exercise 4.1: against the gradients of F.scaled_dot_product_attention.
tq, tk, tv = (tf.tensor(m, requires_grad=True) for m in (Q, K, V))
attended = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
library = tf.grad((attended * tf.tensor(gy)).sum(), [tq, tk, tv])
for name, mine, ref in zip(("gQ", "gK", "gV"), (gQ, gK, gV), library):
    rel = np.max(np.abs(mine - ref) / np.maximum(1e-8, np.abs(mine) + np.abs(ref)))
    print(f"{name}: relative error {rel:.1e}")
    assert rel < 1e-10, (
        f"Exercise 4.1: {name} differs from the library's (relative error {rel:.1e})"
    )

# %% [markdown]
# **Question:** `gS` is exactly zero above the diagonal. Which factor in your formula makes it
# so, and why does the masked backward need no `-inf` of its own?
# <!-- ANSWER: the factor P: masked weights are exactly 0, so P * (...) is 0 there; the mask
# acts in backward through the saved weights. -->
#
# **Question:** tinyformer's op does not save the (T, T) weights for backward; it saves one
# log-sum-exp per row and recomputes P. For T = 4096 with 12 heads in float32, how much
# memory does that save per layer and example, and what does it cost?
# <!-- ANSWER: 12 * 4096^2 * 4 bytes ~ 805 MB per layer and example; the cost is one more
# Q K^T product (and exp) in backward. -->

# %% [markdown]
# ## The backward, stepped, and what it keeps
#
# Written as separate ops, the causal attention of our four tokens is a small graph. Stepping
# its backward node by node shows the gradients of Exercise 4.1 being formed: `gV` leaves the
# last `MatMulBackward` first, then the softmax turns $g_P$ into $g_S$.

# %%
sq, sk, sv = (tf.tensor(m, requires_grad=True) for m in (Q, K, V))
causal_mask = tf.tensor(mask)  # (T, T): 0 on and below the diagonal, -inf above
composed = F.softmax(sq @ sk.T / np.sqrt(d_k) + causal_mask, axis=-1) @ sv  # (T, d_k)
names = {"Q": sq, "K": sk, "V": sv}
viz.graph((composed * tf.tensor(gy)).sum(), params=names)

# %%
for step in viz.BackwardStepper((composed * tf.tensor(gy)).sum(), params=names):
    print(step, end="\n\n")
assert np.allclose(sv.grad, gV) and np.allclose(sq.grad, gQ) and np.allclose(sk.grad, gK)

# %% [markdown]
# Every node keeps what its backward needs until the backward reaches it: that is the
# activation memory of training. `viz.memory` lists it. At a longer sequence (T = 256, one
# head of size 16) compare the attention written as ops with the fused op.
#
# **Exercise 4.2** — which node of the composed attention saves the most, and how much does
# the fused op save in all? Set `biggest` to the name of the op in `composed_table` that saves
# the most bytes (`table.largest()` returns its row: name, module, saved, bytes) and
# `fused_bytes` to the activation bytes of `fused_table` (`table.activations`).

# %%
T_long, hs = 256, 16
lq, lk, lv = (tf.randn(T_long, hs, requires_grad=True) for _ in range(3))
weights_long = F.softmax(lq @ lk.T / np.sqrt(hs), axis=-1)  # (T, T), no mask needed here
composed_table = viz.memory((weights_long @ lv).sum(), params={"q": lq, "k": lk, "v": lv})
with registry.prefer("numpy"):  # the reference of the fused op: the same Function saves
    fused = F.scaled_dot_product_attention(lq, lk, lv)
fused_table = viz.memory(fused.sum(), params={"q": lq, "k": lk, "v": lv})
print(composed_table, fused_table, sep="\n\n")
# Exercise 4.2: biggest (the op's name) and fused_bytes (an int)
### BEGIN SOLUTION
biggest = composed_table.largest()[0]
fused_bytes = fused_table.activations
### END SOLUTION

# %%
# Check Exercise 4.2
assert biggest in ("DivBackward", "SoftmaxBackward", "MatMulBackward"), biggest
assert composed_table.largest()[3] >= T_long * T_long * 4, "the (T, T) weights, float32"
assert fused_bytes == T_long * 4 + T_long * hs * 4, "one lse per row and the output y"
print(f"composed keeps {composed_table.activations:,} bytes, fused {fused_bytes:,}")

# %% [markdown]
# **Question:** three nodes of the composed attention list a (T, T) array, yet its total counts
# two. Which two arrays are they, who keeps each, and what does the fused op keep instead?
# <!-- ANSWER: the scores S, kept by the division (its backward for the divisor needs its
# input), and the weights P, kept by softmax as its output (gx = y * (g - sum(g y))) and by the
# last matmul as its input (gV = P^T gy): one array held by two nodes, counted once. The fused
# op keeps y and one log-sum-exp per row (its q, k, v are leaves here, free) and recomputes S
# and P from them in backward. -->

# %% [markdown]
# ## Multi-head attention: splitting the width into heads
#
# One attention pattern per layer is limiting: a token may need to look at its verb for one
# purpose and at the previous word for another. Multi-head attention splits the width C into
# nh heads of size hs = C / nh, runs attention in each independently, then concatenates the
# heads' outputs and mixes them with one more matrix. Same cost, several patterns.

# %%
nh, hs = 2, C // 2
# Splitting and merging the heads is assignment A3.3: releases and the students' site stub it.
### BEGIN SOLUTION A3.3 split heads, in the tutorial
Qh = Q.reshape(T, nh, hs).transpose(1, 0, 2)  # (T, C) -> (T, nh, hs) -> (nh, T, hs)
Kh = K.reshape(T, nh, hs).transpose(1, 0, 2)
Vh = V.reshape(T, nh, hs).transpose(1, 0, 2)
### END SOLUTION
head_weights = softmax(Qh @ Kh.transpose(0, 2, 1) / np.sqrt(hs) + mask)  # (nh, T, T)
heads = head_weights @ Vh  # (nh, T, hs)
### BEGIN SOLUTION A3.3 merge heads, in the tutorial
merged = heads.transpose(1, 0, 2).reshape(T, C)  # (nh, T, hs) -> (T, nh, hs) -> (T, C)
### END SOLUTION
fig, axes = plt.subplots(1, nh, figsize=(9, 4))
for h in range(nh):
    show(head_weights[h], f"head {h}", axes[h])
plt.tight_layout()
plt.show()

# %% [markdown]
# `nn.Attention` is exactly this, with the three projections fused into one Linear
# (`c_attn`, C -> 3C) and the output mix `c_proj`. Load our matrices into it and compare:

# %%
mha = nn.Attention(C, nh).to(np.float64)
mha.c_attn.weight.data[...] = np.concatenate([W_q, W_k, W_v], axis=1).T  # Linear stores W^T
mha.c_attn.bias.data[...] = 0
mha.c_proj.weight.data[...] = np.eye(C)  # identity mix, so the output is the merged heads
mha.c_proj.bias.data[...] = 0
y, w = mha(tf.tensor(x[None]), is_causal=True, need_weights=True)
print("module vs step by step:", np.abs(y.numpy()[0] - merged).max())
print("weights match:", np.allclose(w.numpy()[0], head_weights))
