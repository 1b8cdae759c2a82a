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
# # 16. Masked autoencoders: hide 75% of an image, paint it back
#
# BERT (tutorial 10) hides 15% of the words and predicts them. MAE (He et al., 2022) does the
# same for images, with one big difference: it hides **75%** of the patches. This notebook
# shows why images need so much more masking, builds the masking with one `argsort`, looks
# at what the asymmetric encoder/decoder saves, and trains one on the 8x8 digits.
#
# The full run (3000 + 2 x 500 steps) took 13 minutes on a heavily loaded 2-core machine, and
# less on an idle one; CI runs a short one.

# %%
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.data import load_digits, make_shapes
from tinyformer.models.mae import (
    MAE,
    MAEConfig,
    masked_patch_loss,
    normalized_patches,
    patchify,
    random_masking,
)
from tinyformer.models.vit import ViT
from tinyformer.train.mae import TrainMAEConfig, train_mae

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
images, labels = load_digits()  # (1797, 1, 8, 8) in [0, 1]
patches = patchify(images, 2)  # (1797, 16, 4): 16 patches of 2x2 pixels
print(images.shape, "->", patches.shape)

# %% [markdown]
# ## Why 75%? Images are redundant
#
# A word is dense with meaning: hide one in six and guessing it already needs the sentence.
# A pixel patch often is not: its neighbours tell you much of what it holds. Here is the
# dumbest possible "model": fill every hidden patch with the mean of its visible neighbours
# (up, down, left, right), or with the image's mean visible patch when it has none. We
# compare it with filling every hidden patch with that image mean, at 15% and at 75% masking,
# on the generated 32x32 shapes of tutorial 9 (4x4 patches) and on the 8x8 digits.


# %%
def neighbour_fill(patches: np.ndarray, mask: np.ndarray, grid: int) -> tuple:
    """-> (hidden patches := mean of their visible 4-neighbours, hidden patches := the image's
    mean visible patch), both (B, N, L); mask (B, N) is 1 at hidden patches."""
    b, visible = len(patches), 1 - mask
    image_mean = (patches * visible[..., None]).sum(1) / visible.sum(1)[:, None]  # (B, L)
    p, v = patches.reshape(b, grid, grid, -1), visible.reshape(b, grid, grid)
    filled, flat = patches.copy(), patches.copy()
    for i in range(grid):
        for j in range(grid):
            total, count = 0.0, 0.0
            for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                if 0 <= i + di < grid and 0 <= j + dj < grid:
                    w = v[:, i + di, j + dj, None]
                    total, count = total + w * p[:, i + di, j + dj], count + w
            guess = np.where(count > 0, total / np.maximum(count, 1), image_mean)
            hidden = mask[:, i * grid + j].astype(bool)
            filled[hidden, i * grid + j] = guess[hidden]
            flat[hidden, i * grid + j] = image_mean[hidden]
    return filled, flat


shapes, _ = make_shapes(300, 32, seed=0)
tf.manual_seed(0)
for name, data, p in (("shapes 32x32", shapes, 4), ("digits 8x8", images, 2)):
    pats, grid = patchify(data, p), data.shape[-1] // p
    for ratio in (0.15, 0.75):
        _, _, mask = random_masking(len(pats), grid * grid, ratio)
        hidden = mask.astype(bool)
        filled, flat = neighbour_fill(pats, mask, grid)
        err, base = (((x - pats) ** 2).mean(-1)[hidden].mean() for x in (filled, flat))
        print(f"{name}, {ratio:.0%} hidden: neighbours' error is {err / base:.0%} of the "
              f"image mean's")  # fmt: skip

# %% [markdown]
# On the shapes, at 15% most hidden patches have visible neighbours, and copying them removes
# a good part of the error: a network could score well by learning to blur, without knowing
# it looks at a circle. At 75% most neighbours are gone too and interpolation is no better
# than the mean: the only way to do well is to know what shapes look like. That is the
# representation we want, and why MAE hides so much.
#
# The 8x8 digits are different: they are already downsampled to the bone, neighbours help
# nothing even at 15%, and every patch carries information. Keep that in mind below: our
# digits are a toy that trains in minutes, not the regime the paper studies (224x224 images,
# 16x16 patches).
#
# ## Random masking with one argsort
#
# Every image gets its own random subset of patches. The trick of the official code: draw one
# uniform number per patch, sort, keep the K patches with the smallest numbers.
# `ids_shuffle` is the sorting permutation; `ids_restore = argsort(ids_shuffle)` is its
# inverse, which later puts the decoder's tokens back in image order.
#
# **Exercise.** Write `my_random_masking(noise, mask_ratio)`: from `noise` (B, N) return
# `ids_shuffle`, `ids_restore` and `mask` (B, N) (1 = hidden, 0 = visible, in image order),
# hiding exactly `round(mask_ratio * N)` patches per image. No loops over the batch.


# %%
def my_random_masking(noise: np.ndarray, mask_ratio: float):
    ### BEGIN SOLUTION
    n = noise.shape[1]
    keep = n - round(mask_ratio * n)
    ids_shuffle = np.argsort(noise, axis=1, kind="stable")
    ids_restore = np.argsort(ids_shuffle, axis=1, kind="stable")
    mask = (ids_restore >= keep).astype(np.float32)
    ### END SOLUTION
    return ids_shuffle, ids_restore, mask


noise = np.random.default_rng(0).random((4, 16))
mine = my_random_masking(noise, 0.75)
for a, b, name in zip(
    mine, random_masking(4, 16, 0.75, noise), ("ids_shuffle", "ids_restore", "mask")
):
    np.testing.assert_array_equal(a, b, err_msg=name)
print("hidden per image:", mine[2].sum(1))
print("ids_restore inverts the shuffle:",
      (np.take_along_axis(mine[0], mine[1], axis=1) == np.arange(16)).all())  # fmt: skip

# %% [markdown]
# ## The asymmetric encoder and decoder
#
# The encoder never sees a mask token: it runs on the K visible patches (+ `[CLS]`) only.
# The decoder is narrower and shallower; it receives the encoded visible tokens plus a learned
# mask token at every hidden position, unshuffled with `ids_restore`, plus its own position
# embeddings. After pretraining it is thrown away.
#
# The saving is the sequence length. An MLP's cost grows with the number of tokens T,
# attention's with T^2. With 75% hidden, the encoder runs on a quarter of the tokens.

# %%
config = MAEConfig()  # the digits model: 16 patches, 12 hidden
tf.manual_seed(0)
model = MAE(config)
print(
    f"encoder tokens: {config.num_visible + 1} of {config.num_patches + 1}; "
    f"widths: encoder {config.n_embd}, decoder {config.decoder_n_embd}"
)


def encoder_flops(t: int, c: int, layers: int) -> int:
    """Multiply-adds of the encoder blocks' matrix products for t tokens of width c."""
    per_block = t * (3 * c * c + c * c + 8 * c * c) + 2 * t * t * c  # qkv, proj, MLP; QK^T, AV
    return layers * per_block


full = encoder_flops(config.num_patches + 1, config.n_embd, config.n_layer)
mae = encoder_flops(config.num_visible + 1, config.n_embd, config.n_layer)
dec = encoder_flops(config.num_patches + 1, config.decoder_n_embd, config.decoder_n_layer)
print(
    f"per image: full encoder {full:,} MACs; MAE encoder {mae:,} + decoder {dec:,} = "
    f"{(mae + dec) / full:.0%} of it"
)

batch = images[:64]
with tf.no_grad():
    vit = ViT(config.vit_config(num_classes=10))  # the same encoder, on every patch
    for label, fn in (("the encoder on all 16 patches (a ViT)", lambda: vit(batch)),
                      ("the encoder on the 4 visible patches", lambda: model.encode(batch)),
                      ("MAE: encoder on 4 + decoder on 16", lambda: model(batch))):  # fmt: skip
        fn()
        start, repeats = time.perf_counter(), 2 if SMALL else 10
        for _ in range(repeats):
            fn()
        ms = (time.perf_counter() - start) / repeats * 1e3
        print(f"{label}: {ms:.1f} ms per batch of 64")

# %% [markdown]
# ## The loss: hidden patches only, normalised targets
#
# The decoder predicts every patch, but the loss reads only the hidden ones: predicting a
# visible patch is copying the input, which teaches nothing. The targets are each patch's
# pixels minus their mean, divided by their standard deviation (`normalized_patches`).
#
# **Exercise.** Write `my_masked_loss(pred, target, mask)`: pred and target (B, N, L), mask
# (B, N) with 1 at hidden patches. Return the mean over hidden patches of the per-patch mean
# squared error, as a tinyformer Tensor (so that it can be differentiated).


# %%
def my_masked_loss(pred: tf.Tensor, target: np.ndarray, mask: np.ndarray) -> tf.Tensor:
    ### BEGIN SOLUTION
    per_patch = ((pred - tf.Tensor(target)) ** 2).mean(axis=-1)  # (B, N)
    weight = tf.Tensor(mask.astype(pred.dtype))
    return (per_patch * weight).sum() / weight.sum()
    ### END SOLUTION


noise = np.random.default_rng(1).random((8, 16))
pred, loss = model(images[:8], noise)
_, _, mask = random_masking(8, 16, config.mask_ratio, noise)
target = normalized_patches(patches[:8])
print(f"yours {my_masked_loss(pred, target, mask).item():.6f}, the model's {loss.item():.6f}")
mine, library = my_masked_loss(pred, target, mask), masked_patch_loss(pred, target, mask)
print("same as the library's:", np.isclose(mine.item(), library.item()))

# %% [markdown]
# **Question:** why normalise the target pixels per patch? Think of two patches holding the
# same stroke, one drawn faintly and one boldly. What does a plain pixel MSE spend its effort
# on, and what does the normalised one ask the model to get right? (The paper reports that
# normalised targets give better representations.) And what happens to a flat background
# patch?
#
# **Question:** the encoder could also be fed mask tokens at the hidden positions, as BERT
# feeds `[MASK]`. Besides the cost, why might it be better that it never sees one? (Hint:
# what does the encoder see at fine-tuning time?)
#
# ## Pretrain, look, fine-tune
#
# `train_mae` runs the three phases of `tinyformer train mae`: pretraining, then a ViT
# classifier from the pretrained encoder and the same classifier from random weights, with the
# same budget.

# %%
workdir = tempfile.TemporaryDirectory(prefix="mae-")
cfg = TrainMAEConfig(
    pretrain_iters=20 if SMALL else 3000,
    finetune_iters=10 if SMALL else 500,
    eval_interval=10 if SMALL else 500,
    n_layer=1 if SMALL else 4,
    n_embd=32 if SMALL else 64,
    decoder_n_layer=1 if SMALL else 2,
    decoder_n_embd=16 if SMALL else 32,
    out_dir=workdir.name,
    progress=not SMALL,
)
logs = train_mae(cfg)

# %%
fig, ax = plt.subplots(figsize=(10, 5.5))
ax.imshow(plt.imread(os.path.join(workdir.name, "reconstructions.png")))
ax.axis("off")
plt.show()

# %% [markdown]
# Top row: what the encoder gets, four patches of sixteen. Second row: the decoder's guesses
# for the hidden patches with the visible ones pasted back. With normalised targets the
# decoder predicts each patch's *shape* only; the picture puts back the true patch's mean and
# contrast (which the model never saw), so read the rows below the first for shapes, not
# brightness.

# %%
for name, run in (("pretrained", logs["pretrained"]), ("scratch", logs["scratch"])):
    print(f"{name:>10}: test accuracy {run['evals'][-1]['test_acc']:.1%}")
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
a.plot(logs["pretrain"]["loss"], alpha=0.5)
a.set(xlabel="pretraining step", ylabel="MSE on hidden patches")
for name in ("pretrained", "scratch"):
    evals = logs[name]["evals"]
    b.plot([e["iter"] for e in evals], [e["test_acc"] for e in evals], "o-", label=name)
b.set(xlabel="fine-tuning step", ylabel="test accuracy")
b.legend()
plt.show()

# %% [markdown]
# With the full settings, the classifier from the MAE encoder reached 96.9% held-out accuracy
# after 500 steps and the same classifier from random weights 68.0% (`docs/mae.md`).
#
# **Question:** `--probe` trains only a linear classifier on the frozen encoder. The MAE paper
# finds MAE features weaker than contrastive ones under a linear probe, yet better after
# fine-tuning. What does that say about what reconstruction teaches the encoder?
