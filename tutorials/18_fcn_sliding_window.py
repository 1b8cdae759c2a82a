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
# # 18. From a classifier to a fully convolutional network
#
# A CNN classifier ends with a Linear layer that reads the flattened last feature map. That
# Linear layer is a convolution in disguise: its kernel covers the whole map. Write it as a
# convolution and the network accepts images of any size. On an 8x8 digit it gives the same
# ten logits; on a larger canvas it gives a *map* of logits, one for every 8x8 window, in one
# pass. This "convolutionalisation" is the first step of Long et al.'s FCN (2015).
#
# 1. Train the small digits CNN, with an extra "background" class.
# 2. Turn its head into a convolution and check that the logits are equal.
# 3. Run it on a canvas with several digits and read the class map.
#
# The full run takes about 20 seconds on two cores; CI runs a short one.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import scipy.special

import tinyformer as tf
from tinyformer import nn
from tinyformer.data.images import load_digits
from tinyformer.models.cnn import CNN, CNNConfig, convolutionalise, linear_to_conv
from tinyformer.optim import AdamW

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
BACKGROUND = 10  # the eleventh class: "no digit centred in this window"
images, labels = load_digits()  # (1797, 1, 8, 8) in [0, 1], labels 0-9
rng = np.random.default_rng(0)
order = rng.permutation(len(images))
train, val = order[:1400], order[1400:]  # the canvases below use held-out digits only

# %% [markdown]
# ## Training data with a background class
#
# A sliding classifier also looks at windows that hold no digit, or parts of two. A digits
# classifier has never seen such windows and would still name a digit for each. So we add an
# eleventh class. Each training crop is an 8x8 window of a 3x3 grid of digit cells (each
# filled with probability 0.6), half of them of each kind:
#
# - a digit: the centre cell, filled, moved by at most 1 pixel; its class;
# - background: moved by 3 or 4 pixels from the centre cell, or the centre cell empty.
#
# Moves of exactly 2 pixels are left out: such a window is neither clearly one nor the other.


# %%
def make_crops(pool: np.ndarray, n: int, rng: np.random.Generator) -> tuple:
    """n crops (n, 1, 8, 8) and their labels (n,) from the digits indexed by `pool`."""
    crops, targets = [], []
    for digit in rng.random(n) < 0.5:
        grid = np.zeros((24, 24), np.float32)
        filled = rng.random((3, 3)) < 0.6
        filled[1, 1] |= digit
        picks = rng.choice(pool, size=(3, 3))
        for i, j in zip(*np.nonzero(filled)):
            grid[8 * i : 8 * i + 8, 8 * j : 8 * j + 8] = images[picks[i, j], 0]
        dy, dx = rng.integers(-1, 2, 2)  # a digit: moved by at most 1 pixel
        while not digit and filled[1, 1] and max(abs(dy), abs(dx)) < 3:
            dy, dx = rng.integers(-4, 5, 2)  # background: by 3 or 4 (or the centre is empty)
        crops.append(grid[8 + dy : 16 + dy, 8 + dx : 16 + dx])
        targets.append(labels[picks[1, 1]] if digit else BACKGROUND)
    return np.stack(crops)[:, None], np.array(targets)


x_val, y_val = make_crops(val, 1000, np.random.default_rng(1))
print(f"background share: {(y_val == BACKGROUND).mean():.0%} of the validation crops")
fig, axes = plt.subplots(1, 10, figsize=(10, 1.4))
for ax, crop, y in zip(axes, x_val, y_val):
    ax.imshow(crop[0], cmap="gray")
    ax.set_title("bg" if y == BACKGROUND else str(y))
    ax.axis("off")
plt.show()

# %% [markdown]
# ## Train the CNN
#
# The model is `tinyformer.models.cnn.CNN` with 11 classes: two stages of two 3x3 convolutions
# and a 2x2 max-pooling (8x8 -> 4x4 -> 2x2), then a Linear layer on the flattened (32, 2, 2)
# map.

# %%
tf.manual_seed(0)
cnn = CNN(CNNConfig(num_classes=11))
optimizer = AdamW(cnn.parameters(), lr=2e-3, weight_decay=0.01)
steps = 40 if SMALL else 1500
batch_rng = np.random.default_rng(2)
for step in range(steps):
    x, y = make_crops(train, 64, batch_rng)
    _, loss = cnn(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 250 == 0 or step == steps - 1:
        print(f"step {step:4d}: loss {loss.item():.3f}")
cnn.eval()
with tf.no_grad():
    predicted = cnn(x_val)[0].data.argmax(1)
print(f"validation accuracy on crops: {(predicted == y_val).mean():.1%}")

# %% [markdown]
# ## The Linear head as a convolution
#
# `reshape(B, -1)` flattens the (C, h, w) map in row-major order, so input `c*h*w + i*w + j` of
# the Linear layer is pixel (i, j) of channel c. Its weight (K, C h w), reshaped to
# (K, C, h, w), is a Conv2d weight: a convolution with an h x w kernel computes
# `sum_{c,i,j} W[k, c, i, j] x[c, i, j] + b[k]` at every position, which at the only position
# of an h x w map is exactly the Linear layer's output.
#
# **Exercise:** write `head_as_conv`: an `nn.Conv2d` whose weight and bias are the Linear's.


# %%
def head_as_conv(linear: nn.Linear, channels: int, side: int) -> nn.Conv2d:
    """The Linear over a flattened (channels, side, side) map as a side x side convolution."""
    k = linear.weight.shape[0]
    # Make nn.Conv2d(channels, k, side) and copy the reshaped weight and the bias into it
    # with conv.load_state_dict({...}).
    ### BEGIN SOLUTION
    conv = nn.Conv2d(channels, k, side)
    conv.load_state_dict({"weight": linear.weight.data.reshape(k, channels, side, side),
                          "bias": linear.bias.data})  # fmt: skip
    ### END SOLUTION
    return conv


head = head_as_conv(cnn.head, 32, 2)
np.testing.assert_array_equal(head.weight.data, linear_to_conv(cnn.head, 32, 2).weight.data)
fcn = nn.Sequential(cnn.stages[0], nn.MaxPool2d(2), cnn.stages[1], nn.MaxPool2d(2), head)

# %% [markdown]
# Now the proof, on held-out digits: the same logits, to rounding (float32 sums taken in a
# different order).

# %%
digits = images[val[:8]]
with tf.no_grad():
    logits = cnn(digits)[0].data  # (8, 11)
    scores = fcn(tf.tensor(digits)).data  # (8, 11, 1, 1)
print("classifier:", logits.shape, " convolutional:", scores.shape)
print(f"largest difference: {np.abs(scores[:, :, 0, 0] - logits).max():.2e}")
np.testing.assert_allclose(scores[:, :, 0, 0], logits, rtol=1e-5, atol=1e-5)
assert (convolutionalise(cnn)(tf.tensor(digits)).data == scores).all()  # the library's version

# %% [markdown]
# ## A canvas of digits
#
# We place held-out digits on a 32x48 canvas at known positions, and run the convolutional
# network on the whole canvas at once.

# %%
places = [(0, 0), (0, 20), (4, 40), (12, 8), (24, 12), (20, 28), (24, 40)]  # (row, col)
canvas = np.zeros((1, 1, 32, 48), np.float32)
truth = []
for (r, c), index in zip(places, val[20:]):
    canvas[0, 0, r : r + 8, c : c + 8] = images[index, 0]
    truth.append(labels[index])
with tf.no_grad():
    scores = fcn(tf.tensor(canvas)).data[0]  # (11, 7, 11)
print("canvas", canvas.shape[2:], "-> class map", scores.shape[1:])

# %% [markdown]
# **Question:** the class map is 7 x 11 for a 32 x 48 canvas. What is the stride of the output
# map, in canvas pixels, and why? Which canvas window does cell (i, j) classify?
#
# **Exercise:** from `places`, compute the map cells where the digits should appear.

# %%
### BEGIN SOLUTION
# two 2x2 poolings: one step of the map is 2 * 2 = 4 canvas pixels, and cell (i, j) reads
# the 8x8 window whose top-left corner is (4i, 4j); the map is (H - 8) / 4 + 1 wide
cells = [(r // 4, c // 4) for r, c in places]
### END SOLUTION
assert scores.shape[1:] == ((32 - 8) // 4 + 1, (48 - 8) // 4 + 1)
found = scores.argmax(0)  # (7, 11)
for (i, j), y in zip(cells, truth):
    print(f"digit {y} at cell ({i}, {j}): predicted {found[i, j]}")
others = np.ones(found.shape, bool)
others[tuple(np.array(cells).T)] = False
print(f"cells without a digit called background: {(found[others] == BACKGROUND).mean():.0%}")

# %% [markdown]
# The class map: the argmax at every cell (background left white), and one panel per class
# with its probability (softmax over the 11 classes).

# %%
probs = scipy.special.softmax(scores, axis=0)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
axes[0].imshow(canvas[0, 0], cmap="gray")
axes[0].set_title("canvas (32 x 48)")
shown = np.ma.masked_equal(found, BACKGROUND)
axes[1].imshow(shown, cmap="tab10", vmin=0, vmax=9)
for i, j in zip(*np.nonzero(found != BACKGROUND)):
    axes[1].text(j, i, str(found[i, j]), ha="center", va="center", color="white")
axes[1].set_title("argmax class per cell (stride 4)")
plt.show()
fig, axes = plt.subplots(2, 6, figsize=(12, 4))
for k, ax in enumerate(axes.ravel()[:11]):
    ax.imshow(probs[k], cmap="viridis", vmin=0, vmax=1)
    ax.set_title("background" if k == BACKGROUND else f"class {k}")
for ax in axes.ravel():
    ax.axis("off")
plt.tight_layout()
plt.show()

# %% [markdown]
# One pass over the canvas shares all the convolution work between overlapping windows;
# classifying the 77 crops one by one would redo most of it. But the values are not exactly
# those of the crops classified alone. The classifier padded every layer's input with zeros
# around its 8x8 window; inside the canvas, a window's border sees its neighbours instead,
# and where the canvas is blank the second convolution sees ReLU(bias), not zero. Compare:

# %%
crops = np.stack([canvas[0, :, 4 * i : 4 * i + 8, 4 * j : 4 * j + 8] for i, j in cells])
with tf.no_grad():
    alone = cnn(crops)[0].data.argmax(1)
print("true digits     ", np.array(truth))
print("crops alone     ", alone)
print("cells of the map", np.array([found[i, j] for i, j in cells]))

# %% [markdown]
# **Question:** which digits does the map get wrong that the crops alone get right, and what
# is around them on the canvas? What would you train on to make the map agree with the truth?
#
# **Question:** the map is coarse, one cell per 4 pixels. What do Long et al. add after
# convolutionalisation to get a label for every pixel? (Notebook 9 builds one such model.)
#
# With the full settings the CNN classifies about 96% of the validation crops correctly. Every
# digit on the canvas is classified correctly as a crop alone, and all but the one in the top
# left corner are found in the map; every cell without a digit is called background.
# Long et al. go on to train the convolutional network on whole images, with a label for every
# output cell (pixel), so that it learns to use the context instead of being confused by it.
