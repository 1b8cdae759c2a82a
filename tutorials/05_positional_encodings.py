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
# # 5. Positional encodings
#
# Attention compares every token with every other by content alone. Nothing in it knows which
# token came first. We first prove that, then look at the two standard fixes: the sinusoidal
# encoding of "Attention is all you need" and the learned position embedding that GPT uses.

# %%
import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer import nn

tf.manual_seed(0)
T, C = 6, 16

# %% [markdown]
# ## Without positions, attention is permutation-equivariant
#
# Shuffle the input tokens, and the (non-causal) self-attention output is shuffled the same
# way: each output row depends on *which* tokens are present, not on *where* they are.

# %%
attention = nn.Attention(C, 2).to(np.float64)
x = tf.randn(1, T, C, dtype=np.float64)
perm = np.random.default_rng(0).permutation(T)
out = attention(x).numpy()
out_shuffled = attention(tf.tensor(x.numpy()[:, perm])).numpy()
print("attn(shuffle(x)) == shuffle(attn(x)):", np.allclose(out_shuffled, out[:, perm]))

# %% [markdown]
# So "dog bites man" and "man bites dog" would look alike to the layer. The fix: add to each
# token vector a vector that depends on its position.
#
# ## Sinusoidal encodings
#
# PE(pos, 2i) = sin(pos / 10000^(2i/C)), PE(pos, 2i+1) = cos(pos / 10000^(2i/C)).
# Each pair of dimensions is a clock at its own frequency, from fast (one cycle in 2*pi
# positions) to very slow. Nearby positions get similar vectors, and the encoding of pos + k is
# a fixed rotation of the encoding of pos, which makes relative offsets easy to read off.
#
# **Exercise 5.1** — write `sinusoidal(positions, width)`: the table (positions, width) of
# float64 whose row p is the encoding of position p, with the sines in the even columns and
# the cosines in the odd ones (width even). No Python loop is needed: broadcast a (T, 1)
# column of positions against a (C/2,) row of frequencies. The check cell compares your table
# with the one tinyformer's encoder-decoder uses (`sinusoidal_positions`, float32): the
# largest absolute difference should be below 1e-6.


# %%
def sinusoidal(positions: int, width: int) -> np.ndarray:
    # Exercise 5.1: the (positions, width) sinusoidal table, sin in even and cos in odd columns.
    ### BEGIN SOLUTION
    pos = np.arange(positions)[:, None]  # (T, 1)
    freq = 1.0 / 10000 ** (np.arange(0, width, 2) / width)  # (C/2,)
    pe = np.zeros((positions, width))
    pe[:, 0::2] = np.sin(pos * freq)
    pe[:, 1::2] = np.cos(pos * freq)
    return pe
    ### END SOLUTION


pe = sinusoidal(100, 64)

# %%
# Check Exercise 5.1: against tinyformer.models.seq2seq.sinusoidal_positions.
from tinyformer.models.seq2seq import sinusoidal_positions  # noqa: E402

assert pe.shape == (100, 64), f"Exercise 5.1: expected a (100, 64) table, got {pe.shape}"
err = np.abs(pe - sinusoidal_positions(100, 64)).max()
print(f"largest difference from sinusoidal_positions: {err:.1e}")
assert err < 1e-6, f"Exercise 5.1: the table differs by up to {err:.1e}"

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
axes[0].imshow(pe.T, aspect="auto", cmap="RdBu")
axes[0].set_xlabel("position")
axes[0].set_ylabel("dimension")
axes[0].set_title("sinusoidal encoding")
similarity = pe @ pe.T
axes[1].imshow(similarity, cmap="viridis")
axes[1].set_title("dot product between positions")
axes[1].set_xlabel("position")
plt.tight_layout()
plt.show()

# %% [markdown]
# The dot product between two positions depends only on their distance (the bands are
# parallel to the diagonal): the encoding carries relative position.

# %%
print("PE(10).PE(15) =", round(pe[10] @ pe[15], 4), " PE(50).PE(55) =", round(pe[50] @ pe[55], 4))

# %% [markdown]
# **Question:** show that $PE(p) \cdot PE(q)$ depends only on $p - q$. (Hint: each sin/cos
# pair contributes $\sin a \sin b + \cos a \cos b$.)
# <!-- ANSWER: sin(p w) sin(q w) + cos(p w) cos(q w) = cos((p - q) w), so the dot product is
# sum_i cos((p - q) w_i), a function of p - q alone. -->
#
# **Question:** with width 64, how many positions does the slowest clock (the last pair of
# columns) take for one full cycle? Could two positions of a 1000-token text get the same
# encoding?
# <!-- ANSWER: 2 pi * 10000^(62/64) ~ 4.7e4 positions; no: the slow clocks have not wrapped
# around within 1000 positions, so every row is distinct. -->

# %% [markdown]
# ## Learned position embeddings
#
# GPT-2 (and our GPT) simply learns a table `wpe` of block_size vectors, one per position,
# initialised at random and trained with everything else. Here is a trained baby GPT's table
# next to its initial one, when a checkpoint is around; otherwise we train a tiny model for a
# few dozen steps so the notebook runs anywhere.

# %%
import os  # noqa: E402

from tinyformer.data import CharTokenizer, LMData, load_text  # noqa: E402
from tinyformer.models import GPT, GPTConfig  # noqa: E402
from tinyformer.optim import AdamW  # noqa: E402

steps = 30 if os.environ.get("TINYFORMER_SMALL") else 300
text = load_text()[:200_000]
tok = CharTokenizer.train(text)
model = GPT(GPTConfig(block_size=32, vocab_size=tok.vocab_size, n_layer=2, n_head=2, n_embd=32))
initial = model.wpe.weight.numpy().copy()
data, rng = LMData(np.array(tok.encode(text)), 32), np.random.default_rng(0)
opt = AdamW(model.parameters(), lr=3e-3)
for _ in range(steps):
    _, loss = model(*data.get_batch("train", 16, rng))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss after {steps} steps: {loss.item():.3f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 3.5))
tables = [(initial, "wpe at initialisation"), (model.wpe.weight.numpy(), f"after {steps} steps")]
for ax, (table, title) in zip(axes, tables):
    normed = table / np.linalg.norm(table, axis=1, keepdims=True)
    ax.imshow(normed @ normed.T, cmap="viridis")
    ax.set_title(f"cosine similarity, {title}")
    ax.set_xlabel("position")
plt.tight_layout()
plt.show()

# %% [markdown]
# At initialisation the positions are unrelated (only the diagonal is bright). Training pulls
# neighbouring positions together, a learned cousin of the sinusoidal picture. Learned tables
# cannot go past block_size; sinusoidal encodings extend to any length, which is why the
# encoder-decoder of the original Transformer uses them.
