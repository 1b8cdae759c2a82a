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
# # 13. Before the Transformer: RNNs, the bottleneck, and Bahdanau attention
#
# Attention did not start with the Transformer. It was invented in 2014 to repair a
# recurrent encoder-decoder (Bahdanau, Cho and Bengio, "Neural Machine Translation by Jointly
# Learning to Align and Translate"). In this notebook:
#
# 1. a GRU cell, written by hand and checked against `nn.GRUCell`;
# 2. **path lengths**: how many steps a gradient takes from the first input to the last
#    output, through an RNN, a stack of 1-D convolutions, and self-attention;
# 3. the **bottleneck** of the plain encoder-decoder, and the additive attention that removes
#    it (you write the score);
# 4. training RNNsearch on the dates task of notebook 11, and its alignment plot.
#
# The full run (600 training steps) takes a few minutes on two cores; CI runs a short one.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import nn

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The GRU cell
#
# A recurrent network reads a sequence one step at a time and keeps a state `h`. The GRU
# (Cho et al., 2014) decides, per unit, how much of the old state to keep:
#
# $$r = \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr}), \qquad
#   z = \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz})$$
# $$n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn})), \qquad
#   h' = (1 - z) \odot n + z \odot h$$
#
# `nn.GRUCell` stores the three gates' weights stacked in PyTorch's order r, z, n:
# `weight_ih` is (3H, I) and `weight_hh` is (3H, H).
#
# **Exercise.** Complete `my_gru_cell`: split the two projections into their three gates and
# return `h'`.


# %%
def my_gru_cell(x, h, cell):
    """x (B, I), h (B, H) -> h' (B, H), with cell's weights."""
    gi = F.linear(x, cell.weight_ih, cell.bias_ih)  # (B, 3H)
    gh = F.linear(h, cell.weight_hh, cell.bias_hh)  # (B, 3H)
    # Split gi and gh into their r, z, n parts (tf.chunk(t, 3, axis=-1)), then apply the
    # equations above.
    ### BEGIN SOLUTION
    i_r, i_z, i_n = tf.chunk(gi, 3, axis=-1)
    h_r, h_z, h_n = tf.chunk(gh, 3, axis=-1)
    r, z = F.sigmoid(i_r + h_r), F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h
    ### END SOLUTION


cell = nn.GRUCell(5, 4)
x, h = tf.Tensor(rng.standard_normal((3, 5)).astype(np.float32)), tf.zeros(3, 4)
np.testing.assert_allclose(my_gru_cell(x, h, cell).data, cell(x, h).data, rtol=1e-5, atol=1e-6)
print("my_gru_cell matches nn.GRUCell")

# %% [markdown]
# **Question:** when `z` is close to 1 the state passes through unchanged. Why does that help
# a gradient travel over many steps (compare with a plain `h' = tanh(W x + U h)`)?

# %% [markdown]
# ## 2. Path lengths
#
# How many operations lie between the first input and the last output?
#
# | layer | steps from x_1 to y_n | why |
# |---|---|---|
# | RNN | n - 1 | y_n depends on x_1 only through h_1, h_2, ..., h_{n-1} |
# | conv1d stack, kernel k | (n - 1) / (k - 1) layers | each layer reaches k - 1 positions further |
# | ... with dilations 1, k, k^2, ... | log_k n layers | each layer multiplies the reach by k |
# | self-attention | 1 | y_n reads every x_j directly |
#
# Every step multiplies the gradient by a Jacobian: over a long path, the product tends to
# shrink (or explode). We measure |d y_n / d x_t| for every t through each of the three.

# %%
n, width = 32, 16
seq = tf.Tensor(rng.standard_normal((1, n, width)).astype(np.float32), requires_grad=True)


def grad_wrt_inputs(y_last):
    """|d sum(y_n) / d x_t| for every t: how strongly the last output depends on each input."""
    seq.grad = None
    y_last.sum().backward()
    return np.linalg.norm(seq.grad[0], axis=-1)


tf.manual_seed(0)
gru = nn.GRU(width, width, batch_first=True)
out, _ = gru(seq)
g_rnn = grad_wrt_inputs(out[:, -1])

convs = [nn.Conv1d(width, width, 2, dilation=2**i) for i in range(5)]  # reach 2^5 = 32
x = seq.transpose(1, 2)  # (B, C, T): channels first, as conv1d wants
for conv in convs:
    x = F.tanh(conv(x))  # each layer is 2^i shorter: no padding
g_conv = grad_wrt_inputs(x[:, :, -1])

attn = nn.Attention(width, 1)
g_attn = grad_wrt_inputs(attn(seq)[:, -1])

fig, ax = plt.subplots(figsize=(7, 3.5))
for g, label in [(g_rnn, "GRU: path n - t"), (g_conv, "dilated conv1d: 5 layers"),
                 (g_attn, "self-attention: path 1")]:  # fmt: skip
    ax.semilogy(np.arange(n), g + 1e-30, "o-", ms=3, label=label)
ax.set(xlabel="input position t", ylabel="|d y_n / d x_t|", ylim=(1e-8, 10))
ax.legend()
plt.show()
print(f"first input's influence relative to the last one's: GRU {g_rnn[0] / g_rnn[-1]:.1e}, "
      f"conv {g_conv[0] / g_conv[-1]:.1e}, attention {g_attn[0] / g_attn[-1]:.1e}")  # fmt: skip

# %% [markdown]
# The GRU's curve falls off exponentially with distance: at initialisation, the first
# character barely reaches the last output. The dilated convolutions reach every position in
# 5 layers, and attention in one. (Training can teach a GRU to keep its gates open, but the
# signal it learns from is the faint one in this plot.)
#
# **Question:** the dilated stack above has kernel 2 and dilations 1, 2, 4, 8, 16. How many
# layers would a stack *without* dilation need to see all 32 inputs? And how many with
# kernel 3 and dilations 1, 3, 9, ...?

# %% [markdown]
# ## 3. The bottleneck, and attention as the way around it
#
# The first neural translators (Sutskever et al., 2014; Cho et al., 2014) encoded the source
# with an RNN and handed the decoder **one vector**: the encoder's last state. Whatever the
# length of the sentence, everything had to pass through that fixed-size vector, and the
# first source words were the ones furthest from it. Their BLEU fell with sentence length.
#
# Bahdanau et al. keep all the encoder states, one *annotation* `h_j` per source position (a
# bidirectional GRU, so each `h_j` knows its left and right context), and at every output
# step let the decoder state `s_{i-1}` choose among them:
#
# $$e_{ij} = v^\top \tanh(W s_{i-1} + U h_j), \qquad
#   a_{ij} = \mathrm{softmax}_j(e_{ij}), \qquad c_i = \sum_j a_{ij} h_j$$
#
# The score is a one-hidden-layer network on the pair (hence "additive", versus the
# Transformer's dot product `q . k`). `U h_j` does not depend on `i`: compute it once.
#
# **Exercise.** Write the score. `model.attn.Wa`, `model.attn.Ua` and `model.attn.Va` are
# the `nn.Linear` layers W, U and v.

# %%
from tinyformer.data.dates import DateTask  # noqa: E402
from tinyformer.models.bahdanau import BahdanauConfig, RNNSearch  # noqa: E402


def additive_score(attn, s, h):
    """s (B, Hd), h (B, S, 2H) -> e (B, S)."""
    # Project s with Wa and h with Ua, add them (s broadcast over S), tanh, then Va.
    ### BEGIN SOLUTION
    q = attn.Wa(s).unsqueeze(1)  # (B, 1, A)
    e = attn.Va(F.tanh(q + attn.Ua(h)))  # (B, S, 1)
    return e.squeeze(-1)
    ### END SOLUTION


tf.manual_seed(0)
toy = RNNSearch(BahdanauConfig(len(DateTask.SOURCE), len(DateTask.TARGET)))
s, h = tf.randn(2, 128), tf.randn(2, 7, 256)
expected = toy.attn.score(s, toy.attn.Ua(h))
np.testing.assert_allclose(additive_score(toy.attn, s, h).data, expected.data, rtol=1e-5)
print("additive_score matches the model's")

# %% [markdown]
# The path from source character j to output i is now short: `h_j` enters `c_i` directly,
# weighted by `a_ij`. The decoder still runs step by step (and so does the encoder), but no
# source information has to survive a trip through every later state.
#
# **Question:** why does attention shorten the gradient path between an output and the source
# position it depends on? What is still sequential in RNNsearch, and what did the Transformer
# remove?

# %% [markdown]
# ## 4. Training RNNsearch on dates
#
# The task of notebook 11: dates in ten formats -> ISO 8601, tested on calendar days never
# seen in training. `tinyformer train bahdanau` runs the same thing from the command line.

# %%
from tinyformer.train.bahdanau import (  # noqa: E402
    TrainBahdanauConfig,
    exact_match,
    load_bahdanau,
    plot_alignment,
    train_bahdanau,
)

workdir = tempfile.TemporaryDirectory(prefix="bahdanau-")  # removed when this kernel stops
small = dict(emb=16, hidden=32, dec_hidden=32, attn=32, batch_size=32) if SMALL else {}
cfg = TrainBahdanauConfig(
    iters=40 if SMALL else 600,
    eval_interval=40 if SMALL else 100,
    test_dates=50 if SMALL else 1000,
    out_dir=workdir.name,
    progress=False,
    **small,
)
log = train_bahdanau(cfg)

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot([e["iter"] for e in log["evals"]], [e["exact_match"] for e in log["evals"]], "o-")
ax.set(xlabel="step", ylabel="held-out exact match (greedy)", ylim=(0, 1.02))
plt.show()

# %% [markdown]
# ## Where does the decoder look?
#
# Each row is one output character, each column a source character, each colour `a_ij`.

# %%
from IPython.display import Image, display  # noqa: E402

model = load_bahdanau(cfg.out_dir)
task = DateTask(seed=cfg.seed, test_dates=cfg.test_dates)
print(f"greedy exact match: {exact_match(model, task)[0]:.1%}")
plot_alignment(model, task, os.path.join(workdir.name, "alignment.png"))
display(Image(os.path.join(workdir.name, "alignment.png")))

# %% [markdown]
# After the full run the year's digits read the year at the end of the source and the day's
# digits read the day, each row one sharp peak; the month's digits spread over the month's
# name (or number). Nobody told the model which characters correspond: the alignment is
# learned from translation alone. Compare with the Transformer's cross-attention
# in notebook 11, and with the numbers in `docs/bahdanau.md`.
#
# Try:
#
# - `TrainBahdanauConfig(hidden=32)`: how small can the encoder be?
# - Replace the attention by the fixed vector (`context = s0`-like, the same at every step):
#   how much worse is exact match, and on which formats?
