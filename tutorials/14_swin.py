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
# # 14. The Swin Transformer: attention in shifted windows
#
# A ViT lets every patch attend to every other patch. With n patches that is n^2 scores per
# head and layer: double the image side, four times the patches, sixteen times the scores.
# Swin (Liu et al., 2021) attends only inside M x M windows, so the cost grows linearly with the
# number of patches, and it gets information across window borders by moving the windows by
# M/2 in every other block. Between stages it merges 2x2 neighbourhoods of tokens, which gives a
# pyramid of feature maps like a CNN's.
#
# In this notebook: windows, the cyclic shift and its mask, the relative position bias, patch
# merging, the cost against a ViT, and a Swin trained on 8x8 digits.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.models.swin import (
    PatchMerging,
    WindowAttention,
    relative_position_index,
    shifted_window_mask,
    window_partition,
    window_reverse,
)
from tinyformer.train.vision import TrainVisionConfig, train_vision

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))  # CI runs this notebook with small sizes

# %% [markdown]
# ## 1. Windows
#
# Swin keeps its tokens as an image-shaped grid (B, h, w, C). `window_partition` cuts the grid
# into non-overlapping M x M windows and stacks them along the batch axis, so that ordinary
# batched attention runs on all windows of all images at once: (B, h, w, C) -> (B * nW, M*M, C).
#
# **Exercise:** write `my_window_partition` with one reshape, one transpose and one reshape.


# %%
def my_window_partition(x: np.ndarray, m: int) -> np.ndarray:
    """(B, h, w, C) -> (B * nW, M*M, C), windows and the tokens inside them in row-major order."""
    ### BEGIN SOLUTION
    b, h, w, c = x.shape
    x = x.reshape(b, h // m, m, w // m, m, c)  # (B, h/M, M, w/M, M, C)
    x = x.transpose(0, 1, 3, 2, 4, 5)  # (B, h/M, w/M, M, M, C)
    return x.reshape(-1, m * m, c)
    ### END SOLUTION


grid = np.arange(8 * 8).reshape(1, 8, 8, 1)  # each token labelled by its position
np.testing.assert_array_equal(my_window_partition(grid, 4), window_partition(grid, 4))
np.testing.assert_array_equal(window_reverse(window_partition(grid, 4), 4, 8, 8), grid)
print(window_partition(grid, 4)[1, :, 0].reshape(4, 4))  # the second window: top right

# %% [markdown]
# ## 2. The shift, and why it needs a mask
#
# In every other block the windows move by s = M/2 down and right. Rather than pad the image
# and attend in more, partly empty windows, Swin rolls the grid up and left by s (`tf.roll`,
# whose gradient rolls back) and keeps the same windows. The bottom-right windows now hold
# tokens from opposite borders of the image, which were never neighbours: a mask stops them
# attending to each other.

# %%
m, s = 4, 2
rows, cols = np.indices((8, 8))
region = (rows // m) * 2 + cols // m  # which regular window each token sits in
rolled = np.roll(region, (-s, -s), axis=(0, 1))
fig, axes = plt.subplots(1, 2, figsize=(8, 4))
for ax, labels, title in ((axes[0], region, "W-MSA windows"), (axes[1], rolled, "after the roll")):
    ax.imshow(labels, cmap="tab10", vmin=0, vmax=9)
    for k in range(1, 2):
        ax.axhline(k * m - 0.5, color="k", lw=2)
        ax.axvline(k * m - 0.5, color="k", lw=2)
    ax.set_title(title)
plt.show()

# %% [markdown]
# Colours are the regular windows a token came from; black lines are the windows attention runs
# in. After the roll, each window mixes tokens from up to four of the old windows: that is how
# information crosses the old borders. But the bottom row and right column of windows also hold
# tokens the roll wrapped around from the opposite side.
#
# **Exercise:** build the (nW, N, N) additive mask for a grid of side `h` rolled by -s: label
# the rolled grid by region (along each axis: [0, h-M), [h-M, h-s), [h-s, h), the last being
# the part that wrapped around), partition the labels into windows, and put -inf wherever a
# query and key have different labels, 0 elsewhere.


# %%
def my_shifted_window_mask(h: int, m: int, s: int) -> np.ndarray:
    ### BEGIN SOLUTION
    bands = np.zeros(h, int)
    bands[h - m :] = 1
    bands[h - s :] = 2
    labels = (3 * bands[:, None] + bands[None, :])[None, :, :, None]  # (1, h, h, 1)
    windows = window_partition(labels, m)[..., 0]  # (nW, N)
    same = windows[:, :, None] == windows[:, None, :]
    return np.where(same, 0.0, -np.inf)
    ### END SOLUTION


mask = shifted_window_mask(8, 8, m, s)
np.testing.assert_array_equal(my_shifted_window_mask(8, m, s), mask)
fig, axes = plt.subplots(1, 4, figsize=(12, 3))
for k, ax in enumerate(axes):
    ax.imshow(mask[k] == 0, cmap="gray")
    ax.set_title(f"window {k}: may attend (white)")
plt.show()

# %% [markdown]
# Window 0 (top left) needs no mask; window 1 and 2 each split into two regions, window 3 into
# four. Each query still sees its own region, so no softmax row is empty.
#
# **Question:** why roll instead of padding the shifted grid with zeros? Count the windows
# each way for an 8 x 8 grid with M = 4.

# %% [markdown]
# ## 3. Relative position bias
#
# Inside a window, two tokens are (dy, dx) apart with dy, dx in [-(M-1), M-1]: (2M-1)^2
# possible offsets. Each head learns one number per offset, added to the attention scores. The
# layer keeps a (2M-1)^2 x nh table and a precomputed (N, N) index into it.

# %%
index = relative_position_index(3)
plt.imshow(index, cmap="viridis")
plt.colorbar(label="row of the bias table")
plt.title("relative_position_index(3): query (rows) x key (columns)")
plt.show()
print(relative_position_index(2))

# %% [markdown]
# The gather `table[index]` is an integer-array index, and tinyformer's `getitem` is
# differentiable: its backward scatter-adds, so each offset's entry collects the gradient of
# every query/key pair that uses it.

# %%
tf.manual_seed(0)
attn = WindowAttention(8, 2, window_size=3)
x = tf.Tensor(np.random.default_rng(0).normal(size=(4, 9, 8)).astype(np.float32))
attn(x).sum().backward()
print("table", attn.relative_position_bias_table.shape, "gradient nonzero in every entry:",
      bool((attn.relative_position_bias_table.grad != 0).all()))  # fmt: skip

# %% [markdown]
# ## 4. Patch merging
#
# Between stages, each 2x2 neighbourhood of tokens is concatenated (4C), normalised and
# projected to 2C: half the resolution, twice the width. Windows stay M x M, so a window of a
# later stage covers four times the image area.

# %%
merge = PatchMerging(48)
y = merge(tf.Tensor(np.zeros((2, 4, 4, 48), np.float32)))
print("(2, 4, 4, 48) ->", y.shape)

# %% [markdown]
# ## 5. Cost against a ViT
#
# Per layer, with n = hw tokens of width C: the projections cost about 4 n C^2 multiply-adds
# (q, k, v and the output) for both. Full attention adds 2 n^2 C (scores and the weighted sum);
# window attention 2 n M^2 C.

# %%
c, p, m = 96, 4, 7
sides = np.array([112, 224, 448, 896])
n = (sides // p) ** 2
vit = 4 * n * c**2 + 2 * n**2 * c
swin = 4 * n * c**2 + 2 * n * m**2 * c
plt.loglog(sides, vit / 1e9, "o-", label="global attention (ViT)")
plt.loglog(sides, swin / 1e9, "o-", label="window attention (Swin, M=7)")
plt.xlabel("image side (pixels)")
plt.ylabel("GMACs per layer, first stage width")
plt.legend()
plt.show()

# %% [markdown]
# **Question:** how does each cost scale with the image side? At which side does the n^2 term
# of the ViT overtake its projections (solve 2 n^2 C = 4 n C^2)? What does Swin give up for its
# linear cost, and which of its parts wins some of it back?

# %% [markdown]
# ## 6. Training on digits
#
# `tinyformer train swin` uses the same loop as the ViT and the CNN. The digits configuration
# has 2x2 patches (a 4x4 grid), 2x2 windows shifted by 1 in the first stage, patch merging, and
# a second stage whose 2x2 grid is a single window.

# %%
workdir = tempfile.TemporaryDirectory()  # removed when this kernel stops
cfg = TrainVisionConfig(
    model="swin",
    iters=30 if SMALL else 1500,
    eval_interval=15 if SMALL else 300,
    out_dir=os.path.join(workdir.name, "swin"),
    progress=not SMALL,
)
log = train_vision(cfg)
evals = log["evals"]
plt.plot([e["iter"] for e in evals], [e["val_accuracy"] for e in evals], "o-")
plt.xlabel("iteration")
plt.ylabel("held-out accuracy")
plt.show()
print(f"held-out accuracy {evals[-1]['val_accuracy']:.1%}")

# %% [markdown]
# **Question:** on 8x8 digits the whole first-stage grid is only 4x4 tokens. Would a ViT's
# global attention cost more than Swin's here? When is Swin's design worth it?
