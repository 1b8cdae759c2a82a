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
# # 6. Train the baby GPT
#
# The same run as `tinyformer train gpt`, from Python: a 4-layer, 4-head, width-128 GPT with a
# context of 64 characters, trained on CPython's bundled documentation. We watch the loss
# curve, sample from the model, and look inside one of its attention heads.
#
# The full run (2000 iterations) takes about 2 minutes on two cores; CI runs a short one.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer import viz
from tinyformer.train import TrainGPTConfig, load_model, sample, train_gpt

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
# The run (checkpoint, log, loss plot) goes into a temporary directory that is removed when
# this notebook's kernel stops. Pass a path of your own to keep it.
workdir = tempfile.TemporaryDirectory(prefix="baby-gpt-")
out_dir = workdir.name
config = TrainGPTConfig(
    iters=40 if SMALL else 2000,
    eval_interval=20 if SMALL else 250,
    eval_iters=2 if SMALL else 20,
    out_dir=out_dir,
    sample_tokens=0,
    progress=not SMALL,
)
log = train_gpt(config)

# %% [markdown]
# ## The loss curve
#
# The loss is the cross-entropy of the next character, in nats. A model that knows nothing
# guesses uniformly over the ~100 characters: ln(100) ~ 4.6. The first drop is the model
# learning character frequencies; later ones are spelling, words and layout.

# %%
evals = log["evals"]
plt.figure(figsize=(7, 4))
plt.plot(np.arange(1, len(log["loss"]) + 1), log["loss"], alpha=0.3, label="train (batch)")
plt.plot([e["iter"] for e in evals], [e["val"] for e in evals], "o-", label="val")
plt.axhline(np.log(103), ls="--", color="gray", label="uniform guess")
plt.xlabel("iteration")
plt.ylabel("cross-entropy (nats)")
plt.legend()
plt.show()
print(f"final val loss: {evals[-1]['val']:.3f}")

# %% [markdown]
# ## Sampling
#
# `generate` feeds the model its own output one token at a time. Temperature divides the
# logits (below 1: safer, more repetitive text); top-k keeps only the k likeliest tokens.

# %%
for temperature in (0.5, 1.0):
    text = sample(out_dir, prompt="The ", tokens=200, temperature=temperature, seed=1)
    print(f"--- temperature {temperature} ---\n{text}\n")

# %% [markdown]
# ## Inside an attention head
#
# We run the model by hand up to the first block and ask its attention layer for its weights.
# Each row is a query position; the causal mask leaves the upper triangle empty. Trained heads
# often attend to the previous character or to the start of the current word.

# %%
model, tokenizer, _ = load_model(out_dir)
prompt = "def assert_equal(a, b):"
idx = np.array([tokenizer.encode(prompt)])
with tf.no_grad():
    x = model.wte(idx) + model.wpe(np.arange(idx.shape[1]))  # (1, T, C)
    block = model.h[0]
    _, weights = block.attn(block.ln_1(x), is_causal=True, need_weights=True)  # (1, nh, T, T)

fig, axes = plt.subplots(1, model.config.n_head, figsize=(16, 4.5))
chars = list(prompt)
for h, ax in enumerate(axes):
    ax.imshow(weights.numpy()[0, h], cmap="viridis")
    ax.set_title(f"layer 0, head {h}")
    ax.set_xticks(range(len(chars)), chars, fontsize=7)
    ax.set_yticks(range(len(chars)), chars, fontsize=7)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Your own training loop
#
# `train_gpt` hides the loop that does the work. Every step of it: draw a batch, run the
# model forward to get the loss, clear the old gradients, backward, and let the optimiser
# update the parameters. Here is a much smaller GPT (1 layer, width 32, context 16) to train.
#
# **Exercise 6.1** — write the loop: 20 steps, each on a batch from
# `data.get_batch("train", 16, batch_rng)`, which returns inputs and targets, both (16, 16)
# token ids; `model(x, y)` returns `(logits, loss)`, logits (16, 16, V) and a scalar loss.
# Append each step's `loss.item()` to `losses`. The check cell wants 20 losses, the first
# near ln(V) (an untrained model guesses uniformly) and the last five at least 0.5 nats lower
# on average.

# %%
from tinyformer.data import CharTokenizer, LMData, load_text  # noqa: E402
from tinyformer.models import GPT, GPTConfig  # noqa: E402
from tinyformer.optim import AdamW  # noqa: E402

corpus = load_text()[:100_000]
tok = CharTokenizer.train(corpus)
data = LMData(np.array(tok.encode(corpus)), 16)
tf.manual_seed(0)
small = GPT(GPTConfig(block_size=16, vocab_size=tok.vocab_size, n_layer=1, n_head=2, n_embd=32))
opt = AdamW(small.parameters(), lr=1e-2)
batch_rng = np.random.default_rng(0)
losses = []
# Exercise 6.1: 20 steps of batch, forward, zero_grad, backward, step; record loss.item().
### BEGIN SOLUTION
for _ in range(20):
    xb, yb = data.get_batch("train", 16, batch_rng)
    _, loss = small(xb, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
### END SOLUTION
print(f"loss: {losses[0]:.3f} at the first step, {losses[-1]:.3f} at the last")

# %%
# Check Exercise 6.1: 20 steps, a start near ln(V), and a clear drop.
assert len(losses) == 20, f"Exercise 6.1: expected 20 losses, got {len(losses)}"
uniform = np.log(tok.vocab_size)
assert abs(losses[0] - uniform) < 0.5, (
    f"Exercise 6.1: the first loss {losses[0]:.3f} should be near ln(V) = {uniform:.3f}"
)
drop = losses[0] - np.mean(losses[-5:])
print(f"ln(V) = {uniform:.3f}; the last five steps are {drop:.2f} nats below the first")
assert drop > 0.5, f"Exercise 6.1: the loss fell by only {drop:.2f} nats in 20 steps"

# %% [markdown]
# **Question:** what goes wrong if the loop leaves out `opt.zero_grad()`? (Try it.)
# <!-- ANSWER: backward adds (+=) into .grad, so each step's gradient is the sum of all the
# earlier ones: the updates follow a stale, growing direction and training degrades. -->
#
# **Question:** the losses above are on training batches. Why is that not enough to tell
# whether the model is learning something useful, and what does `train_gpt` do about it?
# <!-- ANSWER: they measure fit on the data it trains on (and are noisy, one batch each);
# train_gpt also evaluates on held-out validation text every eval_interval, averaged over
# eval_iters batches. -->

# %% [markdown]
# ## What a training step keeps in memory
#
# Between forward and backward every op holds what its backward needs. `viz.trace` records
# which module made each node, so the graph of the trained model's loss can be drawn one box
# per module (`expand=["h.0"]` would open the first block op by op), and `viz.memory` adds up
# the bytes each module saved, against the parameters' own.

# %%
text_ids = np.array([tokenizer.encode(prompt)])  # (1, T + 1)
with viz.trace(model) as tr:
    _, step_loss = model(text_ids[:, :-1], text_ids[:, 1:])
step_graph = viz.graph(step_loss, trace=tr)
print(viz.memory(step_graph).by_module(depth=1))
step_graph.collapse(depth=1)

# %% [markdown]
# **Exercise 6.2** — which single op saves the most activation memory, and in which module?
# Set `top_op` and `top_module` from the per-op table (`viz.memory(step_graph)`, whose
# `largest()` returns the row: op, module, saved, bytes).

# %%
op_table = viz.memory(step_graph)
# Exercise 6.2: top_op and top_module, the op that saves the most and its module
### BEGIN SOLUTION
top_op, top_module, _, _ = op_table.largest()
### END SOLUTION
print(top_op, "in", top_module)

# %%
# Check Exercise 6.2
assert top_op == max(op_table.rows, key=lambda row: row[3])[0], top_op
assert top_module and top_module in dict(model.named_modules()), top_module

# %% [markdown]
# **Question:** why is it that op? How would its saving grow with the context length T and
# with the vocabulary, and what does activation checkpointing trade to shrink such totals?
# <!-- ANSWER: at these sizes it is the fused attention: it keeps q, k, v and its output y,
# four (B, nh, T, hs) arrays, and one log-sum-exp per row (the MLP's GELU, keeping (B, T, 4C),
# comes close). Both grow linearly in T; written as separate ops, attention would also keep
# the (B, nh, T, T) weights and grow as T^2. Checkpointing keeps only each block's input and
# recomputes the rest in backward: about one more forward pass, for a fraction of the memory. -->
