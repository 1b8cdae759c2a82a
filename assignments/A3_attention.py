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
# # Assignment A3: attention
#
# You write scaled dot-product attention, its causal mask and the head bookkeeping of
# multi-head attention, in the library itself:
#
# | task | file | what to write |
# |---|---|---|
# | A3.1 | `tinyformer/ops/attention.py` | `_row_softmax`, `attention_forward`, `_backward` |
# | A3.2 | `tinyformer/ops/attention.py` | the `is_causal` branch of `_scores` |
# | A3.3 | `tinyformer/nn/transformer.py` | `Attention._heads` and the merge in `forward` |
#
# Each of these raises `NotImplementedError` until you replace that line. The docstring of
# `attention.py` gives the math and `docs/ops/attention.md` derives it. Keep the signatures.
# The backward saves only one number per query row (the log-sum-exp), never the T x T weights:
# recompute them from it.
#
# The GPT model runs on these functions, so it only works once all three tasks do; the last
# step of this notebook trains it. Work on the **references** (the registry also has a fused
# attention kernel), as the grader does. Grade yourself from the root of this folder:
#
#     tinyformer grade A3 .

# %%
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import registry
from tinyformer.course import workspace
from tinyformer.models import GPT, GPTConfig
from tinyformer.optim import AdamW

# Stops here, loudly, if `import tinyformer` loads another folder than the one this notebook
# is in (say, another release that you installed later).
workspace.check()

reference = registry.prefer(registry.REFERENCE)
reference.__enter__()  # every primitive runs its NumPy reference from here on
rng = np.random.default_rng(0)

# %% [markdown]
# ## A3.1 Scaled dot-product attention
#
# Write `_row_softmax` first (a row whose every score is -inf has no distribution: its weights
# are 0 and its log-sum-exp +inf), then the forward and the backward. Check the weights and
# gradcheck q, k and v together.

# %%
q, k, v = (
    tf.tensor(rng.normal(size=(2, 4, 3)), dtype="float64", requires_grad=True) for _ in "qkv"
)
y, weights = F.scaled_dot_product_attention(q, k, v, return_weights=True)
print(weights.data.sum(axis=-1))  # every row sums to 1
print(tf.gradcheck(F.scaled_dot_product_attention, [q, k, v], upstream="random"))

# %% [markdown]
# **Exercise.** Compose attention from `matmul`, `softmax` and a transpose (`k.transpose(-2, -1)`
# or `tf.ops.transpose`), and check that its output and its gradient for q equal the fused op's.

# %%
### BEGIN SOLUTION
scores = (q @ tf.ops.transpose(k, -2, -1)) * (1 / np.sqrt(3))
composed = F.softmax(scores, axis=-1) @ v
upstream = rng.normal(size=y.shape)
(g1,) = tf.grad(composed, [q], upstream)
(g2,) = tf.grad(F.scaled_dot_product_attention(q, k, v), [q], upstream)
### END SOLUTION
np.testing.assert_allclose(composed.data, y.data, atol=1e-12)
np.testing.assert_allclose(g1, g2, atol=1e-12)
print("the fused attention equals softmax(q k^T / sqrt(d)) v, and so do their gradients")

# %% [markdown]
# ## A3.2 The causal mask
#
# With `is_causal=True` query i may attend to keys 0..i only. Write the branch of `_scores`
# (when Tq != Tk, align the mask to the top-left, as PyTorch does).
#
# **Exercise.** Show that a causal output does not depend on the future: change the last
# token's key and value and check that every earlier output stays the same.

# %%
### BEGIN SOLUTION
y0 = F.scaled_dot_product_attention(q, k, v, is_causal=True).data
k2, v2 = k.data.copy(), v.data.copy()
k2[:, -1], v2[:, -1] = 5.0, -5.0
y1 = F.scaled_dot_product_attention(q, tf.tensor(k2), tf.tensor(v2), is_causal=True).data
### END SOLUTION
np.testing.assert_allclose(y1[:, :-1], y0[:, :-1], atol=1e-12)
assert not np.allclose(y1[:, -1], y0[:, -1])
print("earlier outputs ignore a later token")

# %% [markdown]
# ## A3.3 Multi-head attention
#
# `Attention._heads` splits (B, T, C) into nh heads of hs = C / nh channels, laid out
# (B, nh, T, hs) so that attention runs on every head at once; after attention, `forward`
# merges (B, nh, T, hs) back into (B, T, C). Use `reshape` and `transpose` (each a view).

# %%
mha = tf.nn.Attention(8, 2)
x = tf.tensor(rng.normal(size=(2, 5, 8)), dtype="float32")
print(mha._heads(x).shape)  # (2, 2, 5, 4)
print(mha(x, is_causal=True).shape)  # (2, 5, 8)

# %% [markdown]
# ## Train the baby GPT on your ops
#
# A small GPT (2 layers, 2 heads, width 32) learns a repeating sentence in a few hundred steps
# if your three tasks are right: the loss falls from about log(vocabulary) towards 0.

# %%
text = "attention is all you need. " * 40
vocab = sorted(set(text))
data = np.array([vocab.index(ch) for ch in text])
tf.manual_seed(0)
model = GPT(GPTConfig(block_size=16, vocab_size=len(vocab), n_layer=2, n_head=2, n_embd=32))
optimizer = AdamW(model.parameters(), lr=3e-3)
for step in range(200):
    starts = rng.integers(0, len(data) - 17, 8)
    xb = np.stack([data[s : s + 16] for s in starts])
    yb = np.stack([data[s + 1 : s + 17] for s in starts])
    _, loss = model(xb, yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0 or step == 199:
        print(f"step {step}: loss {loss.item():.3f}")

# %%
start = np.array([[vocab.index("a")]])
print("".join(vocab[i] for i in model.generate(start, 40, temperature=0.5)[0]))

# %%
reference.__exit__(None, None, None)  # back to the default: kernels where they exist
