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
# # 20. ViLBERT: two streams that ask each other questions
#
# BERT (tutorial 10) reads words; ViT (tutorial 8) reads patches. ViLBERT (Lu et al., 2019)
# reads both, in **two streams** with their own weights, joined by **co-attention**: the
# words' queries look at the image regions' keys and values, and the regions' queries look at
# the words'. It is pretrained, like BERT, on data nobody labelled for the task: pictures with
# captions. Then a small labelled set teaches it to answer questions.
#
# Our pictures: two 8x8 digits on a 16x16 canvas, side by side or stacked. Our captions:
# "a seven left of a two". Our question: "what is left of the two ?". The full run (1500 + 2 x
# 300 steps) took under 3 minutes on a loaded 2-core machine; CI runs a short one.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.data import load_digits
from tinyformer.data.scenes import caption_text, make_scenes, questions
from tinyformer.models.vilbert import CoAttention
from tinyformer.train.vilbert import TrainViLBERTConfig, pretrain_batch, train_vilbert

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
images, labels = load_digits()  # (1797, 1, 8, 8) in [0, 1]
scenes = make_scenes(images, labels, 6, np.random.default_rng(0))
texts, answers = questions(scenes)
fig, axes = plt.subplots(1, 6, figsize=(15, 3))
for i, ax in enumerate(axes):
    ax.imshow(scenes.canvas[i, 0], cmap="gray")
    ax.set_title(f"{caption_text(scenes, i)}\n{texts[i]} -> {answers[i]}", fontsize=8)
    ax.axis("off")
plt.show()
print("regions", scenes.regions.shape, "boxes", scenes.boxes.shape)

# %% [markdown]
# ## Regions, not patches
#
# ViLBERT's image stream does not cut the picture into a grid: an object detector proposes
# regions, and each region enters as its feature vector plus its **box** (x1, y1, x2, y2,
# area, as fractions of the image). Here the "detector" is exact: one region per digit, its
# 64 pixels and its cell. An extra `[IMG]` token, the mean region feature at a box covering
# the whole picture, comes first, as `[CLS]` does for the words.
#
# ## Co-attention
#
# One co-attention layer takes the text stream (B, T, Ct) and the image stream (B, S, Ci).
# Both attend at once, each from the layer's *inputs*:
#
# $$\text{text} \leftarrow \text{text} + \text{Attn}(Q = \text{text}, K = V = \text{image}),
# \qquad \text{image} \leftarrow \text{image} + \text{Attn}(Q = \text{image}, K = V =
# \text{text})$$
#
# then each stream's MLP. The streams may have different widths: the keys and values are
# projected from the other stream's width (`Attention(..., cross=True,
# context_dim=...)`). A word's output is a mix of *region* values, and a region's a mix of
# *word* values. An ordinary self-attention block follows in each stream.
#
# **Exercise.** Write `my_co_attention(layer, text, image, pad)` with the submodules of a
# `CoAttention` layer (`ln_text`, `ln_image`, `text_attn`, `image_attn`, `ln_text_2`,
# `mlp_text`, `ln_image_2`, `mlp_image`), pre-LN. `pad` (B, T) is True at padding words: the
# image's queries must not read them (`key_padding_mask=`).


# %%
def my_co_attention(layer, text, image, pad):
    ### BEGIN SOLUTION
    t, i = layer.ln_text(text), layer.ln_image(image)
    text2 = text + layer.text_attn(t, i)  # words ask the regions
    image2 = image + layer.image_attn(i, t, key_padding_mask=pad)  # regions ask the words
    text2 = text2 + layer.mlp_text(layer.ln_text_2(text2))
    image2 = image2 + layer.mlp_image(layer.ln_image_2(image2))
    return text2, image2
    ### END SOLUTION


tf.manual_seed(0)
layer = CoAttention(d_text=16, d_image=8, n_head=2).to(np.float64)
rng = np.random.default_rng(0)
text = tf.Tensor(rng.standard_normal((2, 5, 16)), requires_grad=True)
image = tf.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
pad = np.array([[False] * 5, [False, False, False, True, True]])
for mine, theirs in zip(my_co_attention(layer, text, image, pad), layer(text, image, pad)):
    np.testing.assert_allclose(mine.data, theirs.data, rtol=1e-12)
print("my_co_attention matches CoAttention")

# %% [markdown]
# The layer is built from ops that each have a hand-written backward, so its gradient needs
# no new math; a float64 gradcheck confirms the composition (random projections: cheap).

# %%
params = [layer.text_attn.kv_proj.weight, layer.image_attn.kv_proj.weight]
print(tf.gradcheck(lambda t, i, *_: layer(t, i, pad), [text, image, *params], fast_mode=True))

# %% [markdown]
# ## Pretraining: three tasks nobody labelled
#
# - **Masked words**: 15% of a caption's words (at least one) are hidden, BERT's way; the text
#   stream predicts them. "a [MASK] left of a two" can only be answered by looking at the
#   picture.
# - **Masked regions**: each region is hidden with some chance (its features zeroed, 90% of
#   the time) and the image stream predicts its class, the digit. ViLBERT predicts the
#   detector's class distribution; our detector is exact, so the class is the target.
# - **Alignment**: half the captions are swapped for another scene's; from the product of
#   the pooled `[CLS]` and `[IMG]` vectors, the model says whether caption and picture match.
#   A mismatched pair gets no masked-word or masked-region targets.
#
# **Exercise.** Write `my_alignment_labels(own, shown)`: lists of caption strings, the scene's
# own and the one shown to the model, -> labels (N,) int64: 0 where the shown caption says what
# the scene's own says, 1 where it does not. (A swapped caption can happen to say the same.)


# %%
def my_alignment_labels(own, shown):
    ### BEGIN SOLUTION
    return np.array([s != o for o, s in zip(own, shown)], np.int64)
    ### END SOLUTION


batch_rng = np.random.default_rng(1)
batch_scenes = make_scenes(images, labels, 8, batch_rng)
(ids, mask, regions, boxes), (words, classes, align) = pretrain_batch(
    batch_scenes, TrainViLBERTConfig(progress=False), batch_rng
)
own = [caption_text(batch_scenes, i) for i in range(8)]
shown = own[:4] + own[5:] + own[4:5]  # the last four rotated by one
print(my_alignment_labels(own, shown), "(the first four are their own)")
print("alignment targets of the batch:", align)
print("masked words (-100: not a target):\n", words)
print("masked regions:\n", classes)

# %% [markdown]
# **Question:** with only two regions, a masked region's digit can always be read from the
# caption ("a seven left of a two", left region hidden). Is that a flaw of the task, or the
# point of it? What would the image stream learn if the caption were never shown?

# %% [markdown]
# ## Pretrain, look, fine-tune
#
# `train_vilbert` runs the three phases of `tinyformer train vilbert`: pretraining on freshly
# drawn captioned scenes, then question answering from a *small* labelled set, once from the
# pretrained encoder and once from random weights, with the same steps, examples and head.
# Every test scene is built from held-out digits.

# %%
workdir = tempfile.TemporaryDirectory(prefix="vilbert-")
cfg = TrainViLBERTConfig(
    pretrain_iters=30 if SMALL else 1500,
    finetune_iters=10 if SMALL else 300,
    eval_interval=15 if SMALL else 250,
    test_scenes=100 if SMALL else 1000,
    batch_size=16 if SMALL else 32,
    n_co_layer=1 if SMALL else 2,
    d_text=32 if SMALL else 64,
    d_image=32 if SMALL else 64,
    out_dir=workdir.name,
    progress=not SMALL,
)
logs = train_vilbert(cfg)

# %%
fig, ax = plt.subplots(figsize=(12, 4))
ax.imshow(plt.imread(os.path.join(workdir.name, "coattention.png")))
ax.axis("off")
plt.show()

# %% [markdown]
# The middle panel: each word's attention over `[IMG]` and the two regions in the last
# co-attention layer (mean over heads). After the full pretraining, a digit's name looked at
# the region that holds that digit (`docs/vilbert.md`). The right panel: each region's
# attention over the words.
#
# **Question:** the fine-tuned question answerer reads only the pooled `[CLS]` x `[IMG]`
# product. Which co-attention layer's weights would you inspect to see *where* it found the
# answer, and why might the last one not tell the whole story?

# %%
for name in ("pretrained", "scratch"):
    print(f"{name:>10}: test accuracy {logs[name]['evals'][-1]['test_acc']:.1%}")
workdir.cleanup()

# %% [markdown]
# With the full settings, the question answerer from the pretrained encoder reached 70.5% on
# 1000 held-out scenes after 300 steps on 100 labelled scenes, and the same model from random
# weights 37.3% (`docs/vilbert.md`). Chance is 10%.
