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
# # 11. The encoder-decoder: cross-attention, teacher forcing, beam search
#
# The original Transformer translates. An encoder reads the whole source. A decoder writes the
# output one token at a time, and at every step it consults the source through
# **cross-attention**: queries from the decoder, keys and values from the encoder.
#
# Our translation task is small but real: dates as people write them -> ISO 8601.
# The output begins with the year, which most formats write last, so the decoder must learn
# *where to look*. At the end we plot where it looks.
#
# The full run takes about 4 minutes on two cores; CI runs a short one.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from tinyformer.data.dates import DateTask
from tinyformer.train.seq2seq import TrainSeq2SeqConfig, exact_match, train_seq2seq
from tinyformer.train.seq2seq.plots import cross_attention

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
# The run goes into a temporary directory, removed when this kernel stops.
workdir = tempfile.TemporaryDirectory(prefix="seq2seq-")
task = DateTask(seed=1337, test_dates=1000)
src, tgt_in, tgt_out, sources, targets = task.examples(task.train_days[:4], task.formats[:4])
for s, t in zip(sources, targets):
    print(f"{s!r:32} -> {t}")

# %% [markdown]
# ## Teacher forcing
#
# In training, the decoder reads the *true* previous characters, `[BOS] y1 ... y9`, and must
# predict `y1 ... y10 [EOS]`. This is the same sequence shifted by one, with a causal mask so
# that position t cannot peek at t+1. All positions train in parallel, as in GPT.

# %%
print("tgt_in :", [DateTask.TARGET.itos[i] for i in tgt_in[0]])
print("tgt_out:", [DateTask.TARGET.itos[i] for i in tgt_out[0]])

# %% [markdown]
# **Exercise 11.1** — write `causal_mask(T)`: the (T, T) boolean mask of the decoder's
# self-attention, True where query position i may attend to key position j (PyTorch's
# convention, which tinyformer's `attn_mask` follows). Position t may read `tgt_in` up to and
# including t. The check cell feeds your mask to `F.scaled_dot_product_attention` on random
# (1, 2, T, 8) queries, keys and values and compares with `is_causal=True`: your relative error
# should be below 1e-12. It also changes the last target character and checks that no earlier
# output moves.


# %%
def causal_mask(T: int) -> np.ndarray:
    # Exercise 11.1: (T, T) bool, True where query i may attend to key j.
    ### BEGIN SOLUTION
    return np.arange(T)[None, :] <= np.arange(T)[:, None]
    ### END SOLUTION


print(causal_mask(tgt_in.shape[1]).astype(int))

# %%
# Check Exercise 11.1: against is_causal=True, and no peeking at the future.
import tinyformer as tf  # noqa: E402
import tinyformer.nn.functional as F  # noqa: E402

T = tgt_in.shape[1]
mask = causal_mask(T)
assert mask.shape == (T, T) and mask.dtype == bool, "Exercise 11.1: want a (T, T) bool array"
q, k, v = np.random.default_rng(0).standard_normal((3, 1, 2, T, 8))
mine = F.scaled_dot_product_attention(tf.tensor(q), tf.tensor(k), tf.tensor(v), attn_mask=mask)
want = F.scaled_dot_product_attention(tf.tensor(q), tf.tensor(k), tf.tensor(v), is_causal=True)
a, b = mine.numpy(), want.numpy()
rel = np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b)))
print(f"relative error against is_causal=True: {rel:.1e}")
assert rel < 1e-12, f"Exercise 11.1: the masked attention differs (relative error {rel:.1e})"
k2, v2 = k.copy(), v.copy()
k2[..., -1, :], v2[..., -1, :] = 5.0, -5.0  # change the last position's key and value
moved = F.scaled_dot_product_attention(tf.tensor(q), tf.tensor(k2), tf.tensor(v2), attn_mask=mask)
assert np.allclose(moved.numpy()[..., :-1, :], mine.numpy()[..., :-1, :]), (
    "Exercise 11.1: changing the last position changed earlier outputs"
)

# %% [markdown]
# **Question:** with teacher forcing every position of a target trains in one forward pass.
# Why can't generation at test time use one pass in the same way?
# <!-- ANSWER: at test time the input of position t + 1 is the model's own output at t, which
# does not exist until step t has run: decoding is sequential (one pass per token). -->

# %% [markdown]
# ## Training
#
# The loss is label-smoothed cross-entropy, as in the paper: the target distribution puts
# 0.9 on the right character and spreads 0.1 over all of them. This discourages
# over-confidence, which helps beam search rank alternatives.

# %%
cfg = TrainSeq2SeqConfig(
    iters=60 if SMALL else 2000,
    eval_interval=30 if SMALL else 250,
    test_dates=100 if SMALL else 1000,
    out_dir=workdir.name,
    progress=False,
)
log = train_seq2seq(cfg)

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
steps = [e["iter"] for e in log["evals"]]
ax.plot(steps, [e["exact_match"] for e in log["evals"]], "o-")
ax.set(xlabel="step", ylabel="held-out exact match (greedy)", ylim=(0, 1.02))
plt.show()

# %% [markdown]
# ## Greedy decoding and beam search
#
# At test time there is no true previous character: the decoder reads its own output.
#
# - **Greedy** decoding takes the likeliest character at every step.
# - **Beam search** keeps the 4 likeliest partial outputs, and returns the best complete one.
#   It ranks them by log-probability, divided by a length penalty so that short outputs do
#   not win just by having fewer terms.
#
# Here the task is nearly deterministic, so beam search rarely changes the answer. On real
# translation, with many plausible outputs, it matters.
#
# **Question:** at each step, beam search with beam 4 scores 4 x V extensions of each source
# and keeps the best 4. Why may a beam that has already produced [EOS] be "extended" only with
# padding, at a log-probability of 0?
# <!-- ANSWER: a finished output must keep its score unchanged while it waits (adding any
# negative log-probability would unfairly penalise it, and a real token after [EOS] would be
# meaningless); padding at 0 keeps it in the ranking as it is. -->

# %%
from tinyformer.train.seq2seq import load_seq2seq  # noqa: E402

model = load_seq2seq(cfg.out_dir)
task = DateTask(seed=cfg.seed, test_dates=cfg.test_dates)
greedy, outputs = exact_match(model, task)
beam, _ = exact_match(model, task, beam=4)
print(f"greedy {greedy:.1%}, beam(4) {beam:.1%} on {cfg.test_dates} held-out dates")

# %% [markdown]
# ## Where does the decoder look?
#
# Each row below is one output character. Its colours are the cross-attention weights over
# the source characters (last decoder layer, averaged over heads). If the words corresponded
# in order, we would see a diagonal. Here the model jumps: the year characters read the end
# of the source, the month reads the month's name, and the day reads the day.

# %%
days = task.test_days[:1].repeat(3)
src, _, _, sources, _ = task.examples(days, ["long", "dotted", "ordinal"])
out = model.greedy(src, DateTask.MAX_TARGET - 1)
tgt_in = np.concatenate([np.ones((3, 1), np.int64), out[:, :-1]], axis=1)
weights = cross_attention(model, src, tgt_in)  # (3, T, S)
fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
for ax, w, s, o in zip(axes, weights, sources, out):
    text = DateTask.TARGET.decode(o) or "?"
    ax.imshow(w[: len(text), : len(s)], aspect="auto")
    ax.set_xticks(range(len(s)), list(s), fontsize=7)
    ax.set_yticks(range(len(text)), list(text))
    ax.set_title(repr(s), fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# After the full run (2000 steps) the model translates all 1000 held-out dates exactly, with
# greedy and with beam search. The maps are sharp, and the reordering is plain to see.
# `tinyformer train seq2seq` saves the same figure as `out/seq2seq/alignment.png`.
#
# Try:
#
# - `TrainSeq2SeqConfig(positions="learned")`: does it still generalise to the held-out
#   dates?
# - `norm="pre"`: does it need less warm-up?
# - `label_smoothing=0`: what happens to the confidence of the outputs?
