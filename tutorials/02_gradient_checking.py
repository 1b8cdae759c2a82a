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
# # 2. Gradient checking
#
# A hand-written `backward` can be wrong in ways training hides for hours: a missing factor,
# a transposed matrix, a gradient that forgets to sum over a broadcast axis. The cure is to
# compare it with a derivative computed without any backward code at all: **finite differences**.

# %%
import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.ops.layer_norm import layer_norm_forward
from tinyformer.ops.softmax import softmax_forward

# %% [markdown]
# ## Central differences
#
# $$f'(x) \approx \frac{f(x + \varepsilon) - f(x - \varepsilon)}{2\varepsilon}$$
#
# The error of this **central** difference shrinks like $\varepsilon^2$ (the one-sided
# $(f(x+\varepsilon) - f(x))/\varepsilon$ only like $\varepsilon$). But a small $\varepsilon$
# divides rounding noise: each $f$ carries a relative rounding error of about the machine
# epsilon, $10^{-16}$ in float64 and $10^{-7}$ in float32, which the division by $\varepsilon$
# amplifies. Let us measure both effects on $f(x) = e^x$ at $x = 1$, where $f'(1) = e$.

# %%
epsilons = np.logspace(-12, -1, 45)
errors = {}
for dtype in (np.float32, np.float64):
    x = dtype(1.0)
    errs = []
    for eps in epsilons:
        e = dtype(eps)
        estimate = (np.exp(x + e) - np.exp(x - e)) / (2 * e)
        errs.append(abs(float(estimate) - np.e) / np.e)
    errors[np.dtype(dtype).name] = errs

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, errs in errors.items():
    ax.loglog(epsilons, errs, ".-", label=name)
ax.axvline(1e-6, color="gray", ls="--", label="gradcheck's eps = 1e-6")
ax.set_xlabel("step eps")
ax.set_ylabel("relative error of f'(1)")
ax.legend()
ax.set_title("Truncation error falls, rounding error rises")
plt.show()

# %% [markdown]
# In float64, $\varepsilon = 10^{-6}$ sits near the bottom of the curve: relative error
# around $10^{-10}$. In float32 the best possible error is around $10^{-3}$ to $10^{-2}$,
# as large as the bugs we want to catch. **So gradient checks run in float64.**

# %%
print({name: f"{errs[np.argmin(abs(epsilons - 1e-6))]:.1e}" for name, errs in errors.items()})

# %% [markdown]
# ## Relative error, not absolute
#
# A gradient of $10^{4}$ off by $10^{-3}$ is excellent; a gradient of $10^{-4}$ off by
# $10^{-3}$ is garbage. `gradcheck` accepts $|a - n| \le \text{atol} + \text{rtol}\,|n|$
# (analytic $a$, numeric $n$; PyTorch's rule, defaults atol $10^{-5}$, rtol $10^{-3}$).
#
# ## A correct backward passes

# %%
x = tf.Tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
print(tf.gradcheck(lambda x: tf.nn.functional.softmax(x, axis=-1), [x]))

# %% [markdown]
# `gradcheck` perturbed each of the 12 inputs, re-ran the forward twice per input, and compared
# every entry of the $12 \times 12$ Jacobian with what backward produced for each one-hot
# upstream gradient.
#
# ## A deliberately wrong backward
#
# Here is softmax with a classic slip: its backward leaves out one term of the
# vector-Jacobian product. (The forward is the library's own; deriving the right backward is
# assignment A2.1.)


# %%
class BrokenSoftmax(tf.Function):
    @staticmethod
    def forward(ctx, x):
        y = softmax_forward(x)  # the library's NumPy softmax over the last axis
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, gy):
        (y,) = ctx.saved_tensors
        return y * gy  # BUG: a term is missing


try:
    tf.gradcheck(BrokenSoftmax.apply, [x])
except tf.GradcheckError as error:
    print(error)

# %% [markdown]
# Reading the report:
# - **input 0 (shape (3, 4))** — which input's gradient is wrong;
# - **output produced by: BrokenSoftmax** — which op made the output;
# - **output[1, 2] w.r.t. input 0[1, 2]** — the worst disagreement: the Jacobian entry
#   d output[1, 2] / d input[1, 2], each index in its own tensor's shape;
# - **analytic vs numeric**, with the absolute and relative errors against the tolerance;
# - how many entries are wrong: 48 of 144. Softmax mixes only within a row, so the entries
#   linking different rows are zero for both methods; the 48 wrong ones are every entry of each
#   row's 4 x 4 block. Errors everywhere the op has a derivative point at a missing term, not a
#   single bad index;
# - **Looks like** — the shape of the mistake: here the analytic gradient is 0 where the numeric
#   one is not, the missing term. A constant factor, a sign flip and a transpose are named too.
#
# ## Subtler: off by one percent
#
# A gradient scaled by 1.01 trains almost as well, and silently. gradcheck still sees it:


# %%
class SlightlyOff(tf.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return 2.02 * x * gy  # 1% too large


result = tf.gradcheck(SlightlyOff.apply, [x], raise_exception=False)
print(bool(result))  # False: with raise_exception=False the report comes back in the result
print(result.report)

# %% [markdown]
# ## Repair a layer norm
#
# Layer norm without its affine part normalises each row of x (rows, D):
# $\hat x = (x - \mu) \cdot r$, with $\mu$ the row's mean and
# $r = 1 / \sqrt{\sigma^2 + \epsilon}$ (one per row). The backward below has a bug.
# Read its gradcheck report.

# %%
EPS = 1e-5


class BrokenLayerNorm(tf.Function):
    @staticmethod
    def forward(ctx, x):
        # the library's NumPy layer norm of x (rows, D), without weight and bias: xhat, and per
        # row the mean and r (unused here: mu; r as (rows, 1), to broadcast over a row)
        xhat, _, rstd = layer_norm_forward(x, None, None, EPS)
        rstd = rstd[:, None]
        ctx.save_for_backward(xhat, rstd)
        return xhat

    @staticmethod
    def backward(ctx, gy):
        xhat, rstd = ctx.saved_tensors
        return rstd * (gy - gy.mean(axis=-1, keepdims=True))


xl = tf.Tensor(np.random.default_rng(2).standard_normal((4, 6)), requires_grad=True)
print(tf.gradcheck(BrokenLayerNorm.apply, [xl], raise_exception=False).report)

# %% [markdown]
# **Exercise 2.1** — repair it: write `layer_norm_backward(gy, xhat, rstd)`, with gy and xhat
# (rows, D) and rstd (rows, 1), returning gx (rows, D). `FixedLayerNorm` below is
# `BrokenLayerNorm` with your backward. The broken one keeps only the path through $x - \mu$;
# $r$ depends on x too (through $\sigma^2$). Differentiate that path as well, and write the
# result with row means of gy and of gy * xhat. The check cell gradchecks your op (the full
# 576-entry Jacobian) and compares its gradient, for a random upstream gradient, with
# `F.layer_norm`'s: your relative error should be below 1e-10.


# %%
# Exercise 2.1: the layer-norm backward. gy, xhat (rows, D), rstd (rows, 1) -> gx (rows, D).
def layer_norm_backward(gy, xhat, rstd):
    ### BEGIN SOLUTION A2.4 layer_norm backward, in the tutorial
    gy_mean = gy.mean(axis=-1, keepdims=True)  # (rows, 1)
    gy_xhat_mean = (gy * xhat).mean(axis=-1, keepdims=True)  # (rows, 1)
    return rstd * (gy - gy_mean - xhat * gy_xhat_mean)
    ### END SOLUTION


class FixedLayerNorm(BrokenLayerNorm):
    @staticmethod
    def backward(ctx, gy):
        xhat, rstd = ctx.saved_tensors
        return layer_norm_backward(gy, xhat, rstd)


gy = np.random.default_rng(3).standard_normal(xl.shape)
(gx,) = tf.grad((FixedLayerNorm.apply(xl) * tf.Tensor(gy)).sum(), [xl])  # runs your backward

# %%
# Check Exercise 2.1: finite differences, then the library's layer norm.
print("gradcheck:", tf.gradcheck(FixedLayerNorm.apply, [xl]))  # raises a report if wrong
xr = tf.Tensor(xl.data.copy(), requires_grad=True)
(gx_ref,) = tf.grad((tf.nn.functional.layer_norm(xr, 6) * tf.Tensor(gy)).sum(), [xr])
rel = np.max(np.abs(gx - gx_ref) / np.maximum(1e-8, np.abs(gx) + np.abs(gx_ref)))
print(f"relative error against F.layer_norm: {rel:.1e}")
assert rel < 1e-10, f"Exercise 2.1: gx differs from F.layer_norm's (relative error {rel:.1e})"

# %% [markdown]
# **Question:** the report counts 143 of 576 entries out of tolerance. Why can at most 144 be
# wrong, and what does "almost all of them" say about the kind of bug?
# <!-- ANSWER: layer norm mixes only within a row, so only the 4 blocks of 6 x 6 = 144
# entries are non-zero; a bug in nearly every one is a missing term that touches the whole
# row (here the variance path), not a wrong index. -->
#
# **Question:** each row of the correct gx sums to zero (try `gx.sum(axis=-1)`). Why must it?
# <!-- ANSWER: adding a constant to a row does not change the output (the mean absorbs it),
# so the derivative along (1, ..., 1) is zero: <gx, 1> = 0 for every upstream gradient. -->

# %% [markdown]
# ## Big inputs: fast mode
#
# The full Jacobian costs two forwards per input element and one backward per output element.
# For big tensors, `fast_mode=True` compares one random projection $v^\top J u$ instead: two
# forwards and one backward per input. A wrong gradient almost surely changes the projection.

# %%
big = tf.Tensor(np.random.default_rng(1).standard_normal((64, 128)), requires_grad=True)
print("correct:", tf.gradcheck(lambda t: tf.nn.functional.softmax(t), [big], fast_mode=True))
print("broken: ", tf.gradcheck(BrokenSoftmax.apply, [big], fast_mode=True, raise_exception=False))

# %% [markdown]
# ## Why float32 is refused

# %%
try:
    tf.gradcheck(lambda t: t * 2, [tf.randn(3, requires_grad=True)])
except ValueError as error:
    print(error)

# %% [markdown]
# ## Test your own op
#
# tinyformer's own test suite runs `gradcheck` on every op with random shapes (including
# broadcasting and non-contiguous arrays), and checks that it would notice a 1% bug planted in
# any op's backward. The same battery runs on an op of yours: describe how to draw its inputs
# in an `OpSpec`, and `check_op` gradchecks it on random shapes and memory layouts, checks that
# float32 stays float32 and that `no_grad` records nothing. `SlightlyOff` from above fails,
# and the report names the op, the sample's shapes and the worst element's index.

# %%
from tinyformer.testing import OpCheckError, OpSpec, check_op, unary_sample  # noqa: E402


def square(x):
    return SlightlyOff.apply(x)


spec = OpSpec("square", square, unary_sample(), functions=(SlightlyOff,))
try:
    check_op(spec, examples=5)
except OpCheckError as error:
    print(error)

# %% [markdown]
# From the shell, `pytest --tinyformer-ops my_ops.py` runs the same checks on every spec in a
# file, one test per op and check (docs: "Test your own op"); `tinyformer gradcheck --op
# softmax` gradchecks one of tinyformer's ops.
