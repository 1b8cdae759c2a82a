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
# # 8. A ViT on digits, against a CNN
#
# We train the tiny ViT (4 blocks, width 64, 2x2 patches) and the small CNN on the same 80/20
# split of scikit-learn's 8x8 digits, compare them, and look at what the ViT attends to.
# The full runs take about a minute (ViT) and ten seconds (CNN); CI runs short ones.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.models.vit import attention_rollout
from tinyformer.train.vision import (
    TrainVisionConfig,
    evaluate_model,
    load_trained,
    load_vision,
    train_vision,
)

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
# Each run goes into a temporary directory, removed when this kernel stops.
workdir = tempfile.TemporaryDirectory()
runs = {}
for model, iters in (("vit", 1500), ("cnn", 600)):
    out = os.path.join(workdir.name, model)
    cfg = TrainVisionConfig(
        model=model,
        iters=30 if SMALL else iters,
        eval_interval=15 if SMALL else 300,
        out_dir=out,
        progress=not SMALL,
    )
    runs[model] = (train_vision(cfg), out)

# %% [markdown]
# ## Learning curves and accuracy
#
# On 1,437 training images the CNN wins: convolutions *assume* that nearby pixels belong
# together and that a pattern means the same thing anywhere in the image. The ViT has to learn
# both from data (its position embeddings start random), and small data is not enough to learn
# them well. With millions of images the ViT's flexibility pays off; here it does not.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for model, (log, _) in runs.items():
    evals = log["evals"]
    ax.plot([e["iter"] for e in evals], [e["val_accuracy"] for e in evals], "o-", label=model)
    print(f"{model}: held-out accuracy {evals[-1]['val_accuracy']:.1%}")
ax.set_xlabel("iteration")
ax.set_ylabel("held-out accuracy")
ax.legend()
plt.show()

# %% [markdown]
# ## What the [CLS] token looks at
#
# Each head of the last block gives a weight to every patch; rollout multiplies the attention
# of all blocks together (adding the residual path) to trace where the final [CLS] state came
# from.

# %%
vit, cfg, meta = load_trained(runs["vit"][1])
_, _, x_val, y_val = load_vision(cfg)
print(
    "ViT accuracy on the held-out images:", evaluate_model(vit, "vit", x_val, y_val, 10)["accuracy"]
)
images = x_val[:4]
maps = vit.attention_maps(images)
rollout = attention_rollout(maps)[:, 0, 1:].reshape(-1, 4, 4)
last = maps[-1][:, :, 0, 1:].mean(axis=1).reshape(-1, 4, 4)
fig, axes = plt.subplots(3, 4, figsize=(8, 6))
for i in range(4):
    axes[0, i].imshow(images[i, 0], cmap="gray")
    axes[1, i].imshow(last[i], cmap="viridis")
    axes[2, i].imshow(rollout[i], cmap="viridis")
for ax in axes.ravel():
    ax.axis("off")
axes[0, 0].set_title("image", loc="left")
axes[1, 0].set_title("last block, heads averaged", loc="left")
axes[2, 0].set_title("rollout", loc="left")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Patchify a batch
#
# Notebook 7 cut one image into patches. The ViT does it for a whole batch, inside
# `patch_embed`, a conv with kernel = stride = P.
#
# **Exercise 8.1** — write `patchify(images, P)`: images (B, C, H, W) -> patches (B, N, C*P*P)
# with N = (H/P)(W/P), patches in row-major order over the grid (left to right, then top to
# bottom), each flattened in (C, P, P) order, the layout of the conv's weight (D, C, P, P).
# Use reshapes and one transpose, no loop. The check cell multiplies your patches by the
# trained ViT's patch-embedding weights and compares with `vit.patch_embed`: the largest
# relative error should be below 1e-5 (float32).


# %%
def patchify(images: np.ndarray, P: int) -> np.ndarray:
    # Exercise 8.1: (B, C, H, W) -> (B, N, C*P*P), row-major over the grid, (C, P, P) inside.
    ### BEGIN SOLUTION
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P)  # (B, C, gh, P, gw, P)
    x = x.transpose(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, P, P)
    return x.reshape(B, (H // P) * (W // P), C * P * P)
    ### END SOLUTION


patches = patchify(images, vit.config.patch_size)
print("patches:", patches.shape)

# %%
# Check Exercise 8.1: a Linear on your patches must equal the ViT's patch-embedding conv.
w, b = vit.patch_embed.weight.numpy(), vit.patch_embed.bias.numpy()  # (D, C, P, P), (D,)
mine = patches @ w.reshape(w.shape[0], -1).T + b  # (B, N, D)
with tf.no_grad():
    conv = vit.patch_embed(tf.Tensor(images)).numpy()  # (B, D, gh, gw)
want = conv.reshape(conv.shape[0], conv.shape[1], -1).transpose(0, 2, 1)  # (B, N, D)
assert mine.shape == want.shape, f"Exercise 8.1: tokens {mine.shape}, want {want.shape}"
rel = np.max(np.abs(mine - want) / np.maximum(1e-6, np.abs(mine) + np.abs(want)))
print(f"relative error against vit.patch_embed: {rel:.1e}")
assert rel < 1e-5, f"Exercise 8.1: your patches do not match the conv (relative error {rel:.1e})"

# %% [markdown]
# **Question:** swap the order inside a patch to (P, P, C). Would a ViT trained from scratch
# on such patches be any worse? Would this trained one?
# <!-- ANSWER: from scratch, no: a fixed permutation of a Linear's inputs is learned as easily.
# This trained one, yes: its weights expect (C, P, P); with one channel here the two orders
# happen to coincide, so try it on RGB. -->
#
# **Question:** on 8x8 digits, what do P = 1 and P = 4 give in tokens per image, and in
# attention scores per head? Which would you expect to train better here, and why?
# <!-- ANSWER: P = 1: 64 (+1) tokens, 65^2 = 4225 scores; P = 4: 4 (+1), 25 scores. P = 4
# leaves only four coarse tokens (little to attend over); P = 1 costs 16x the attention and
# each token is a single pixel: P = 2 is the compromise. -->
