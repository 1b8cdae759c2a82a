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
# # 9. Going back up: transposed convolution, max-unpooling, and a U-Net
#
# Classifiers shrink an image to one vector. Segmentation needs a label for every pixel, so the
# network must grow its feature maps back to full size. Two ways, both by hand here, then a
# U-Net trained on generated shapes.

# %%
import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer.data import make_shapes
from tinyformer.train.vision import TrainVisionConfig, load_trained, load_vision, train_vision

# %% [markdown]
# ## Transposed convolution: every input pixel stamps the kernel
#
# A 2x2 input, a 3x3 kernel, stride 2. Each input value multiplies the whole kernel and the
# result is added onto the output at a position that moves 2 pixels per input pixel. Where
# stamps overlap (the middle row and column) they add.

# %%
x = np.array([[1.0, 2.0], [3.0, 4.0]])
kernel = np.arange(1.0, 10.0).reshape(3, 3)
stride = 2
out = np.zeros(((2 - 1) * stride + 3, (2 - 1) * stride + 3))
for i in range(2):
    for j in range(2):
        out[i * stride : i * stride + 3, j * stride : j * stride + 3] += x[i, j] * kernel
print(out)
by_op = F.conv_transpose2d(tf.tensor(x[None, None]), tf.tensor(kernel[None, None]), stride=2)
print("conv_transpose2d agrees:", np.allclose(by_op.numpy()[0, 0], out))

# %% [markdown]
# It is also the *transpose* of a convolution: for the same kernel,
# <conv2d(a), b> = <a, conv_transpose2d(b)>. That is why its backward is a conv2d.

# %%
a, b = np.random.default_rng(0).standard_normal((2, 1, 1, 5, 5))
conv_a = F.conv2d(tf.tensor(a), tf.tensor(kernel[None, None]), stride=2).numpy()  # (1, 1, 2, 2)
b = b[:, :, :2, :2]
lhs = (conv_a * b).sum()
rhs = (a * F.conv_transpose2d(tf.tensor(b), tf.tensor(kernel[None, None]), stride=2).numpy()).sum()
print(f"<conv(a), b> = {lhs:.6f}, <a, conv_T(b)> = {rhs:.6f}")

# %% [markdown]
# **Exercise 9.1** — the output size. Write `conv_transpose_size(h, k, stride, padding,
# output_padding, dilation)`: the side of `conv_transpose2d`'s output (an int) for an input of
# side h and a kernel of side k. Start from the stamping picture above: the last stamp starts
# at (h - 1) * stride and covers a dilated kernel of side dilation * (k - 1) + 1; `padding`
# then crops that many pixels from each border and `output_padding` adds rows at the end only.
# (It inverts conv2d's size rule, whose floor is why `output_padding` exists.) The check cell
# compares your formula with the op's output on about a hundred combinations: all must agree
# exactly.


# %%
def conv_transpose_size(h, k, stride=1, padding=0, output_padding=0, dilation=1):
    # Exercise 9.1: the output side of conv_transpose2d, an int.
    ### BEGIN SOLUTION
    return (h - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    ### END SOLUTION


print("2x2 input, 3x3 kernel, stride 2 ->", conv_transpose_size(2, 3, stride=2))

# %%
# Check Exercise 9.1: against the shapes conv_transpose2d produces.
from tinyformer.autograd import OpError  # noqa: E402

wrong, compared = [], 0
for h, k, stride, padding, dilation in np.ndindex(3, 3, 3, 2, 2):
    h, k, stride, dilation = h + 1, k + 1, stride + 1, dilation + 1
    output_padding = stride - 1  # the largest allowed (less than the stride)
    try:
        got = F.conv_transpose2d(tf.zeros(1, 1, h, h), tf.zeros(1, 1, k, k), stride=stride,
                                 padding=padding, output_padding=output_padding,
                                 dilation=dilation).shape[-1]  # fmt: skip
    except OpError:  # the padding crops everything away
        continue
    compared += 1
    mine = conv_transpose_size(h, k, stride, padding, output_padding, dilation)
    if mine != got:
        wrong.append(f"h={h} k={k} stride={stride} padding={padding} dilation={dilation}: "
                     f"yours {mine}, the op's {got}")  # fmt: skip
assert not wrong, "Exercise 9.1: wrong sizes\n" + "\n".join(wrong)
print(f"conv_transpose_size matches conv_transpose2d on all {compared} combinations")

# %% [markdown]
# **Question:** a conv2d with k = 3, stride 2, padding 1 maps both 7x7 and 8x8 inputs to 4x4.
# Which `output_padding` gives each of them back from 4x4 with k = 3, stride 2, padding 1?
# <!-- ANSWER: (4 - 1) * 2 - 2 + 3 = 7 with output_padding 0; 8 with output_padding 1. -->

# %% [markdown]
# ## Max-unpooling: put each maximum back where it came from
#
# Max-pooling keeps the largest value of each 2x2 window and, with `return_indices=True`,
# remembers where it was. Max-unpooling writes each value back at that position and zeros
# elsewhere: the spatial detail that pooling discarded comes back from the indices.

# %%
img = np.random.default_rng(1).permutation(16).reshape(1, 1, 4, 4).astype(float)
pooled, idx = F.max_pool2d(tf.tensor(img), 2, return_indices=True)
restored = F.max_unpool2d(pooled, idx, 2)
fig, axes = plt.subplots(1, 3, figsize=(8, 3))
for ax, grid, title in zip(axes, (img[0, 0], pooled.numpy()[0, 0], restored.numpy()[0, 0]),
                           ("input", "max_pool2d", "max_unpool2d")):  # fmt: skip
    ax.imshow(grid, cmap="viridis")
    for (r, c), v in np.ndenumerate(grid):
        ax.text(c, r, int(v), ha="center", va="center", color="w")
    ax.set_title(title)
    ax.axis("off")
plt.show()
print("indices (h * W + w in the input):\n", idx.numpy()[0, 0])

# %% [markdown]
# ## A U-Net on shapes
#
# The generated dataset: circles, squares and triangles on noisy backgrounds, with a class for
# every pixel. The U-Net goes down twice (conv, conv, max-pool), then back up with transposed
# convolutions, concatenating the encoder's feature map of the same size at each step (the skip
# connections) so that edges stay sharp.
#
# **Question:** the U-Net *concatenates* each skip with the upsampled map (`cat([up, skip],
# axis=1)`, doubling the channels) where a ResNet would add them. What can the next
# convolution do with a concatenation that it cannot do with a sum?
# <!-- ANSWER: keep the two apart and weigh them with separate weights (a sum is the special
# case of equal weights): the fine, early features and the coarse, semantic ones stay
# distinguishable, at the price of more channels. -->

# %%
SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
images, masks = make_shapes(4, size=32, seed=0)
fig, axes = plt.subplots(2, 4, figsize=(8, 4))
for i in range(4):
    axes[0, i].imshow(images[i].transpose(1, 2, 0))
    axes[1, i].imshow(masks[i], cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
for ax in axes.ravel():
    ax.axis("off")
plt.show()

# The run goes into a temporary directory, removed when this kernel stops.
workdir = tempfile.TemporaryDirectory(prefix="unet-")
out = workdir.name
cfg = TrainVisionConfig(
    model="unet",
    iters=20 if SMALL else 600,
    eval_interval=10 if SMALL else 200,
    shapes=200 if SMALL else 2000,
    out_dir=out,
    progress=not SMALL,
)
log = train_vision(cfg)
print(f"held-out mean IoU: {log['evals'][-1]['val_miou']:.2f}")

# %%
unet, cfg, _ = load_trained(out)
_, _, x_val, y_val = load_vision(cfg)
with tf.no_grad():
    pred = unet(x_val[:4])[0].numpy().argmax(axis=1)
fig, axes = plt.subplots(3, 4, figsize=(8, 6))
for i in range(4):
    axes[0, i].imshow(x_val[i].transpose(1, 2, 0))
    axes[1, i].imshow(y_val[i], cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
    axes[2, i].imshow(pred[i], cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
for ax in axes.ravel():
    ax.axis("off")
axes[1, 0].set_title("truth", loc="left")
axes[2, 0].set_title("U-Net", loc="left")
plt.show()
