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
# # 7. Images as tokens
#
# "An image is worth 16x16 words": a Vision Transformer cuts an image into patches, turns each
# patch into a vector, and from then on treats them exactly like the words of a sentence. This
# notebook builds that input pipeline by hand and checks it against tinyformer's `ViT`, then
# counts ViT-Base's 86 million parameters layer by layer.

# %%
import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer.data import load_digits
from tinyformer.models import VIT_CONFIGS, ViT, ViTConfig

images, labels = load_digits()
image = images[0]  # (1, 8, 8): one channel, 8x8 pixels
P = 2  # patch size: 8x8 pixels -> 4x4 = 16 patches of 2x2

# %% [markdown]
# ## Patchify
#
# Reshape (C, H, W) into a grid of P x P patches, then flatten each patch into a vector of
# C * P * P numbers. With H = W = 8 and P = 2 that is 16 patches of 4 numbers: 16 "words".

# %%
C, H, W = image.shape
g = H // P
patches = image.reshape(C, g, P, g, P).transpose(1, 3, 0, 2, 4).reshape(g * g, C * P * P)
print("patches:", patches.shape)  # (16, 4)

fig, axes = plt.subplots(g, g, figsize=(4, 4))
for i in range(g):
    for j in range(g):
        axes[i, j].imshow(
            image[0, i * P : (i + 1) * P, j * P : (j + 1) * P], cmap="gray", vmin=0, vmax=1
        )
        axes[i, j].axis("off")
fig.suptitle(f"digit {labels[0]} as {g * g} tokens")
plt.show()

# %% [markdown]
# ## The patch embedding is a convolution
#
# Each flattened patch is mapped to a D-dimensional token by one shared Linear layer. A conv
# with kernel = stride = P computes exactly that: each output position sees one patch, no
# overlap, the same weights everywhere. ViT implementations use the conv because it is one op.

# %%
D = 6
rng = np.random.default_rng(0)
w = rng.standard_normal((D, C, P, P))  # conv weight (D, C, P, P) = Linear weight (D, C*P*P)
by_conv = F.conv2d(
    tf.tensor(image[None].astype(np.float64)), tf.tensor(w), stride=P
)  # (1, D, 4, 4)
by_linear = patches.astype(np.float64) @ w.reshape(D, -1).T  # (16, D)
print("same tokens:", np.allclose(by_conv.numpy()[0].reshape(D, -1).T, by_linear))

# %% [markdown]
# ## [CLS] and position embeddings
#
# A learned [CLS] vector is put in front of the patch tokens; after the encoder, the classifier
# reads only its final state (it has attended to every patch). Attention ignores order, so a
# learned position embedding is added to every token. `ViT.tokens` does these steps:

# %%
tf.manual_seed(0)
vit = ViT(VIT_CONFIGS["vit_tiny_digits"])
tokens = vit.tokens(images[:2])
print("tokens:", tokens.shape, "= (batch, 1 [CLS] + 16 patches, width 64)")

# %% [markdown]
# ## Counting ViT-Base, layer by layer
#
# ViT-Base: 224x224 RGB images, P = 16, D = 768, 12 layers, 12 heads, MLP width 4D, 1000
# classes. Per block: attention has Q, K, V and output projections (4 D^2 weights + 4 D biases),
# the MLP 8 D^2 + 5 D, two LayerNorms 4 D: about 12 D^2.

# %%
D, L, P, K = 768, 12, 16, 1000
n_patches = (224 // P) ** 2
rows = {
    "patch embedding (conv 16x16x3 -> 768)": D * 3 * P * P + D,
    "[CLS] token": D,
    f"position embeddings ({n_patches} + 1 tokens)": (n_patches + 1) * D,
    f"{L} blocks x (12 D^2 + 13 D)": L * (12 * D * D + 13 * D),
    "final LayerNorm": 2 * D,
    "classifier head": D * K + K,
}
for name, count in rows.items():
    print(f"{name:42s} {count:>12,}")
total = sum(rows.values())
print(f"{'total':42s} {total:>12,}  (paper: 86M)")
assert (
    total
    == VIT_CONFIGS["vit_base_patch16_224"].num_parameters()
    == ViTConfig(224, 16, 3, 1000, 12, 12, 768).num_parameters()
)

# %% [markdown]
# **Exercise 7.1** — turn the table above into a function: `vit_parameters(D, L, P)` returns
# the parameter count (an int) of a ViT of width D, L blocks and patch size P on 224 x 224 RGB
# images with 1000 classes (MLP width 4D, as in all three of the paper's models). Then count
# ViT-L/16 (D = 1024, L = 24) and ViT-H/14 (D = 1280, L = 32). The check cell compares your
# counts with `ViTConfig.num_parameters()`, which they must match exactly, and prints the
# paper's rounded figures (table 1) beside them.


# %%
def vit_parameters(D: int, L: int, P: int, image: int = 224, classes: int = 1000) -> int:
    # Exercise 7.1: patch embedding + [CLS] + positions + L blocks + final norm + head.
    ### BEGIN SOLUTION
    n_tokens = (image // P) ** 2 + 1  # patches and [CLS]
    embed = D * 3 * P * P + D + D + n_tokens * D
    return embed + L * (12 * D * D + 13 * D) + 2 * D + D * classes + classes
    ### END SOLUTION


large, huge = vit_parameters(1024, 24, 16), vit_parameters(1280, 32, 14)
print(f"ViT-L/16: {large:,}   ViT-H/14: {huge:,}")

# %%
# Check Exercise 7.1: the exact counts of ViTConfig.
for name, mine, key, paper in (
    ("ViT-B/16", vit_parameters(768, 12, 16), "vit_base_patch16_224", 86),
    ("ViT-L/16", large, "vit_large_patch16_224", 307),
    ("ViT-H/14", huge, "vit_huge_patch14_224", 632),
):
    exact = VIT_CONFIGS[key].num_parameters()
    print(f"{name}: yours {mine:>12,}  ViTConfig {exact:>12,}  paper {paper}M")
    assert mine == exact, f"Exercise 7.1: {name} is off by {mine - exact:+,} parameters"

# %% [markdown]
# **Question:** ViT-H uses patches of 14 instead of 16. How many parameters does that change,
# compared with ViT-H at P = 16, and in which rows?
# <!-- ANSWER: only the patch embedding (3 P^2 D weights: fewer) and the position embeddings
# (257 instead of 197 tokens: more): about 154k fewer in all, nothing in the blocks. -->
#
# **Question:** then what does P = 14 cost? Compare the number of tokens, and the attention
# scores per head, with P = 16.
# <!-- ANSWER: 257 tokens instead of 197 (1.3x the work in every linear layer) and
# 257^2 / 197^2 ~ 1.7x the attention scores: the cost is compute, not parameters. -->

# %% [markdown]
# 12 L D^2 = 84.9M of the 86.6M: almost everything is in the blocks.
#
# ## The attention matrix
#
# A 224x224 image at P = 16 is a 14x14 grid: 196 patches + [CLS] = 197 tokens. Each head of
# each layer scores every token against every token:

# %%
T = n_patches + 1
print(f"{T} x {T} = {T * T:,} scores per head; x 12 heads x 12 layers = {T * T * 144:,} per image")
print(f"at P = 8 (28x28 grid): {(28 * 28 + 1) ** 2:,} per head: attention is quadratic in tokens")
