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
# # Assignment A2: softmax, log-softmax + cross-entropy, layer norm
#
# You write the NumPy reference of four ops, forward and backward, in the library itself:
#
# | task | file | what to write |
# |---|---|---|
# | A2.1 | `tinyformer/ops/softmax.py` | `softmax_forward`, `softmax_backward` |
# | A2.2 | `tinyformer/ops/log_softmax.py` | `log_softmax_forward`, `log_softmax_backward` |
# | A2.3 | `tinyformer/ops/cross_entropy.py` | `cross_entropy_forward`, `cross_entropy_backward` |
# | A2.4 | `tinyformer/ops/layer_norm.py` | `layer_norm_forward`, `layer_norm_backward` |
#
# Each function raises `NotImplementedError` until you replace that line. Each file's docstring
# gives the forward's math and what the backward computes from what; deriving the backward is
# yours (`docs/ops/softmax-losses.md` and `docs/ops/layers.md` show the derivations once A2 is
# due). Keep the signatures: the `Function` classes below them call your code through the
# registry.
#
# Work on the **references**: the library also has fast Numba kernels for these ops, so this
# notebook forces the references with `registry.prefer(registry.REFERENCE)`, as the grader does.
# After editing a file, restart the kernel (or run `importlib.reload`) to load your change.
#
# Grade yourself at any time from the root of this folder:
#
#     tinyformer grade A2 .
#
# The exercises below (marked "your code here") are not graded: they are how you convince
# yourself that your code is right before the grader does.

# %%
import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import registry
from tinyformer.course import workspace

# Stops here, loudly, if `import tinyformer` loads another folder than the one this notebook
# is in (say, another release that you installed later).
workspace.check()

reference = registry.prefer(registry.REFERENCE)
reference.__enter__()  # every primitive runs its NumPy reference from here on
rng = np.random.default_rng(0)

# %% [markdown]
# ## A2.1 Softmax
#
# Write `softmax_forward` and `softmax_backward` first. Then check the forward on one row and
# the backward against finite differences: `tf.gradcheck` returns True, or raises a report of
# the worst element.

# %%
x = tf.tensor(rng.uniform(-3, 3, (2, 5)), dtype="float64", requires_grad=True)
print(F.softmax(x, axis=-1).data.sum(axis=-1))  # both rows sum to 1
print(tf.gradcheck(lambda x: F.softmax(x, axis=-1), [x], upstream="random"))

# %% [markdown]
# **Exercise.** The Jacobian of softmax at a vector x is `diag(y) - y y^T`. Build it with
# NumPy for `x0` below, then build it row by row with autograd (`tf.grad` of `y[i]`), and
# compare the two.

# %%
x0 = rng.uniform(-2, 2, 4)
### BEGIN SOLUTION
y0 = F.softmax(tf.tensor(x0, dtype="float64"), axis=-1).data
jacobian = np.diag(y0) - np.outer(y0, y0)
xt = tf.tensor(x0, dtype="float64", requires_grad=True)
rows = [tf.grad(F.softmax(xt, axis=-1)[i], [xt])[0] for i in range(4)]
### END SOLUTION
np.testing.assert_allclose(np.stack(rows), jacobian, atol=1e-12)
np.testing.assert_allclose(jacobian.sum(axis=0), 0, atol=1e-12)  # softmax's outputs sum to 1
print("the softmax Jacobian matches diag(y) - y y^T")

# %% [markdown]
# ## A2.2 Log-softmax
#
# `log(softmax(x))` takes log(0) = -inf once a logit is far below the largest one. Write
# `log_softmax_forward` so that it stays finite for logits like +-1e4, and its backward.

# %%
big = tf.tensor([[1e4, 0.0, -1e4]], dtype="float64", requires_grad=True)
print(F.log_softmax(big, axis=-1).data)  # finite: [0, -1e4, -2e4]
print(tf.gradcheck(lambda x: F.log_softmax(x, axis=0), [x], upstream="random"))

# %% [markdown]
# ## A2.3 Cross-entropy
#
# **Exercise.** For mean reduction over N rows the gradient of the loss is
# `(softmax(logits) - onehot(target)) / N`. Check your backward against that formula on the
# logits and targets below (`label_smoothing=0`).

# %%
logits = tf.tensor(rng.normal(size=(6, 4)), dtype="float64", requires_grad=True)
target = rng.integers(0, 4, 6)
### BEGIN SOLUTION
F.cross_entropy(logits, target).backward()
p = F.softmax(logits, axis=1).data
expected = (p - np.eye(4)[target]) / 6
### END SOLUTION
np.testing.assert_allclose(logits.grad, expected, atol=1e-12)
print(tf.gradcheck(lambda z: F.cross_entropy(z, target, label_smoothing=0.1), [logits]))

# %% [markdown]
# ## A2.4 Layer norm
#
# Write `layer_norm_forward` (it returns y and, per row, the mean and 1/std its backward
# reuses) and `layer_norm_backward` (gradients for x, weight and bias).
#
# **Exercise.** Gradcheck `F.layer_norm` over the last two axes of a (2, 3, 4) input with a
# weight and a bias, all three requiring gradients.

# %%
### BEGIN SOLUTION
xs = tf.tensor(rng.normal(size=(2, 3, 4)), dtype="float64", requires_grad=True)
w = tf.tensor(rng.uniform(0.5, 1.5, (3, 4)), dtype="float64", requires_grad=True)
b = tf.tensor(rng.normal(size=(3, 4)), dtype="float64", requires_grad=True)
passed = tf.gradcheck(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), [xs, w, b], upstream="random")
### END SOLUTION
assert passed and xs.shape == (2, 3, 4) and w.shape == b.shape == (3, 4)
print("layer_norm passes gradcheck with a weight and a bias")

# %%
reference.__exit__(None, None, None)  # back to the default: kernels where they exist
