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
