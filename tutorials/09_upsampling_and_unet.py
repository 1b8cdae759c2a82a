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
