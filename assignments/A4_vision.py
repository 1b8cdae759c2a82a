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
# # Assignment A4: vision
#
# You write the NumPy reference of four image ops, forward and backward, in the library itself:
#
# | task | file | what to write |
# |---|---|---|
# | A4.1 | `tinyformer/ops/conv2d.py` | `_columns` (im2col), `conv2d_forward`, `conv2d_backward` |
# | A4.2 | `tinyformer/ops/conv_transpose2d.py` | `conv_transpose2d_forward`, `_backward` |
# | A4.3 | `tinyformer/ops/max_pool2d.py` | `max_pool2d_forward` (and indices), `_backward` |
# | A4.4 | `tinyformer/ops/max_unpool2d.py` | `max_unpool2d_forward`, `max_unpool2d_backward` |
#
# Each raises `NotImplementedError` until you replace that line. The docstrings give the
# forward's math and what each backward computes from what (deriving the backward is yours),
# `docs/ops/conv.md` explains the forward, and `tinyformer/ops/_im2col.py` has the strided
# window view (`windows`) and its adjoint (`scatter_windows`) for you to use. Keep the
# signatures.
#
# The last step trains a small U-Net, which runs on all four ops. Work on the **references**,
# as the grader does. Grade yourself from the root of this folder:
#
#     tinyformer grade A4 .

# %%
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import registry
from tinyformer.course import workspace
from tinyformer.models import SegConfig, UNet
from tinyformer.optim import Adam

# Stops here, loudly, if `import tinyformer` loads another folder than the one this notebook
# is in (say, another release that you installed later).
workspace.check()

reference = registry.prefer(registry.REFERENCE)
reference.__enter__()  # every primitive runs its NumPy reference from here on
rng = np.random.default_rng(0)


def leaf(*shape):
    return tf.tensor(rng.normal(size=shape), dtype="float64", requires_grad=True)


# %% [markdown]
# ## A4.1 conv2d
#
# im2col first: `_columns` turns the windows of every image into the columns of one matrix,
# so the forward is one matrix product per group. Then gradcheck with stride, padding and a
# bias.

# %%
x, w, b = leaf(2, 3, 6, 5), leaf(4, 3, 3, 3), leaf(4)
print(F.conv2d(x, w, b, padding=1).shape)  # (2, 4, 6, 5)
print(tf.gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [x, w, b]))

# %% [markdown]
# ## A4.2 conv_transpose2d
#
# **Exercise.** conv_transpose2d is the adjoint of conv2d with the same weights:
# `<conv2d(x, w), y> = <x, conv_transpose2d(y, w)>` for any x and y (same stride and padding).
# Check it for stride 2 and padding 1.

# %%
### BEGIN SOLUTION
y = leaf(2, 4, 3, 3)
lhs = (F.conv2d(x, w, stride=2, padding=1).data * y.data).sum()
rhs = (x.data * F.conv_transpose2d(y, w, stride=2, padding=1, output_padding=(1, 0)).data).sum()
### END SOLUTION
np.testing.assert_allclose(lhs, rhs, rtol=1e-12)
print("conv_transpose2d is conv2d's adjoint")

# %% [markdown]
# ## A4.3 and A4.4 max pooling and unpooling
#
# `max_pool2d(..., return_indices=True)` also returns where each maximum was (flat positions
# h W + w in each plane), and `max_unpool2d` puts the values back there.
#
# **Exercise.** Show that `max_unpool2d(max_pool2d(x))` keeps exactly the maxima of x: every
# non-zero of the result is a window maximum, at its place in x, and nothing else survives.

# %%
### BEGIN SOLUTION
xp = tf.tensor(rng.permutation(2 * 3 * 6 * 6).reshape(2, 3, 6, 6) + 1.0, dtype="float64")
pooled, indices = F.max_pool2d(xp, 2, return_indices=True)
restored = F.max_unpool2d(pooled, indices, 2).data
windows = xp.data.reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5))
### END SOLUTION
kept = restored != 0
np.testing.assert_array_equal(restored[kept], xp.data[kept])
np.testing.assert_array_equal(np.sort(restored[kept]), np.sort(windows.ravel()))
print("unpooling keeps exactly the maxima")

# %% [markdown]
# ## A U-Net on your ops
#
# A small U-Net (conv2d, max_pool2d, conv_transpose2d and skip connections) learns to segment
# bright squares from a noisy background. The loss falls if your four tasks are right.

# %%
images = rng.normal(0, 0.3, (8, 1, 16, 16))
masks = np.zeros((8, 16, 16), dtype=np.int64)
for i, (r, c) in enumerate(rng.integers(0, 10, (8, 2))):
    images[i, 0, r : r + 6, c : c + 6] += 1.0
    masks[i, r : r + 6, c : c + 6] = 1
tf.manual_seed(0)
unet = UNet(SegConfig(in_channels=1, num_classes=2, width=4))
optimizer = Adam(unet.parameters(), lr=1e-2)
for step in range(40):
    _, loss = unet(images.astype(np.float32), masks)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 10 == 0 or step == 39:
        print(f"step {step}: loss {loss.item():.3f}")

# %%
reference.__exit__(None, None, None)  # back to the default: kernels where they exist
