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
# # 1. Autograd from scratch
#
# A neural network is a function built from small operations. Training needs the gradient of
# the loss with respect to every parameter. **Reverse-mode automatic differentiation** gets all
# of them in one backward sweep, for about the cost of one more forward pass.
#
# In this notebook we
# 1. build a tiny graph by hand, with scalars, and run backward through it step by step;
# 2. write the same machinery as a 30-line class;
# 3. see the same computation in tinyformer, where each node is a `Function` on arrays.

# %%
import math

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer import viz

# %% [markdown]
# ## A graph by hand
#
# Take $L = (a \cdot b + c)^2$ with $a = 2, b = -3, c = 10$. Forward, one node at a time:

# %%
a, b, c = 2.0, -3.0, 10.0
d = a * b  # node 1: mul
e = d + c  # node 2: add
L = e**2  # node 3: square
print(f"d = {d}, e = {e}, L = {L}")

# %% [markdown]
# Backward walks the nodes in reverse. Each node knows its **local** derivative; the chain rule
# multiplies it by the gradient arriving from above ("upstream"):
#
# | node | local derivatives | gradients |
# |---|---|---|
# | $L = e^2$ | $L'_e = 2e$ | $g_e = 2e$ |
# | $e = d + c$ | $e'_d = e'_c = 1$ | $g_d = g_c = g_e$ |
# | $d = ab$ | $d'_a = b$, $d'_b = a$ | $g_a = g_d b$, $g_b = g_d a$ |

# %%
g_L = 1.0  # dL/dL
g_e = g_L * 2 * e
g_d = g_e * 1.0
g_c = g_e * 1.0
g_a = g_d * b
g_b = g_d * a
print(f"dL/da = {g_a}, dL/db = {g_b}, dL/dc = {g_c}")

# %% [markdown]
# ## The same, as a class
#
# Each value remembers its parents and how to push a gradient to them. `backward()` sorts the
# graph so that a node runs only after everything that uses it has sent its gradient, then
# visits nodes in reverse. We sort **iteratively**: a recursive sort would crash on deep graphs.
#
# **Exercise 1.1** — give `Value` a `tanh` method: `v.tanh()` returns a new `Value` holding
# $t = \tanh(v)$ (a Python float in, a float out), with `v` as its only parent and a backward
# that sends $g \cdot \frac{dt}{dv}$ back to `v`. Write the derivative in terms of the output:
# $\frac{d}{dv}\tanh v = 1 - t^2$. The cell below calls it once; the check cell after it runs
# backward through a small neuron $\tanh(w x + b)$ and compares every gradient with
# tinyformer's: your relative errors should be below 1e-12 (float64 rounding).


# %%
class Value:
    def __init__(self, data, parents=(), backward=lambda g: ()):
        self.data, self.grad = data, 0.0
        self.parents, self._backward = parents, backward

    def __mul__(self, other):
        return Value(
            self.data * other.data, (self, other), lambda g: (g * other.data, g * self.data)
        )

    def __add__(self, other):
        ### BEGIN SOLUTION A1.1 add, in the tutorial
        return Value(self.data + other.data, (self, other), lambda g: (g, g))
        ### END SOLUTION

    def square(self):
        return Value(self.data**2, (self,), lambda g: (g * 2 * self.data,))

    def tanh(self):
        # Exercise 1.1: forward t = tanh(self.data); backward sends g * (1 - t^2) to self.
        ### BEGIN SOLUTION A1.1 tanh, in the tutorial
        t = math.tanh(self.data)
        return Value(t, (self,), lambda g: (g * (1 - t**2),))
        ### END SOLUTION

    def backward(self):
        ### BEGIN SOLUTION A1.2 backward, in the tutorial
        order, seen, stack = [], set(), [(self, False)]
        while stack:  # iterative depth-first search: parents before children
            node, done = stack.pop()
            if done:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((p, False) for p in node.parents)
        self.grad = 1.0
        for node in reversed(order):
            for parent, g in zip(node.parents, node._backward(node.grad)):
                parent.grad += g  # += : a value used twice receives both gradients
        ### END SOLUTION


va, vb, vc = Value(2.0), Value(-3.0), Value(10.0)
vL = (va * vb + vc).square()
vL.backward()
print(va.grad, vb.grad, vc.grad)
vt = Value(0.5).tanh()  # Exercise 1.1 runs here
print("tanh(0.5) =", vt.data)

# %%
# Check Exercise 1.1: a neuron tanh(w x + b), by our Value and by tinyformer.
vw, vx, vb_ = Value(-1.5), Value(0.8), Value(0.3)
neuron = (vw * vx + vb_).tanh()
neuron.backward()
tw, tx, tb_ = (tf.tensor(v, dtype="float64", requires_grad=True) for v in (-1.5, 0.8, 0.3))
(tw * tx + tb_).tanh().backward()
for name, mine, ref in (("w", vw, tw), ("x", vx, tx), ("b", vb_, tb_)):
    rel = abs(mine.grad - float(ref.grad)) / max(1e-12, abs(mine.grad) + abs(float(ref.grad)))
    print(f"d neuron / d{name}: {mine.grad:+.6f}  relative error {rel:.1e}")
    assert rel < 1e-12, f"Exercise 1.1: the gradient for {name} is off (relative error {rel:.1e})"
assert abs(neuron.data - math.tanh(-1.5 * 0.8 + 0.3)) < 1e-15, "Exercise 1.1: forward is wrong"

# %% [markdown]
# **Question:** the backward of `tanh` is written with its output `t`, not its input. Why is
# that convenient, and which other op in this course saves its output for backward?
# <!-- ANSWER: 1 - t^2 needs only t, already computed in forward, so backward does no extra
# exp/tanh; softmax saves y the same way (gx = y * (gy - sum(gy * y))). -->
#
# **Question:** what is the gradient of `tanh` at x = 5? What does that mean for a deep
# stack of tanh layers whose inputs are large?
# <!-- ANSWER: 1 - tanh(5)^2 ~ 1.8e-4: the unit saturates, the gradient nearly vanishes, and
# multiplied over many layers it vanishes (hence careful initialisation, normalisation). -->

# %% [markdown]
# ## The same in tinyformer
#
# tinyformer does exactly this, on arrays. Every op is a `Function` with a `forward` and a
# `backward`; `y.grad_fn` is the node that made `y`.

# %%
ta = tf.tensor(2.0, requires_grad=True)
tb = tf.tensor(-3.0, requires_grad=True)
tc = tf.tensor(10.0, requires_grad=True)
tL = (ta * tb + tc) ** 2
print("graph:", tL.grad_fn, "<-", tL.grad_fn.parents)
tL.backward()
print(ta.grad, tb.grad, tc.grad)
assert (ta.grad, tb.grad, tc.grad) == (g_a, g_b, g_c)

# %% [markdown]
# ## Seeing the graph
#
# `viz.graph` draws what `backward()` will walk: the ops, named as PyTorch names a `grad_fn`,
# with the shape and dtype of what they made and the bytes they saved for backward, and the
# leaves by the names we give them. In Jupyter the graph shows as a picture; `print` gives the
# same as a tree, read from the loss back to the leaves, and `.save("graph.svg")` writes it.

# %%
tL = (ta * tb + tc) ** 2  # the same L again: the first graph was freed by its backward
graph = viz.graph(tL, params={"a": ta, "b": tb, "c": tc})
print(graph)
graph  # noqa: B018 (the last expression of a cell: Jupyter draws it)

# %% [markdown]
# `viz.BackwardStepper` runs that backward one node at a time. Each step shows the node, the
# gradient that reached it, what it sends to each input, and the `.grad` of the leaves so far:
# the table above, computed by the engine.
#
# **Exercise 1.2** — step through the backward of `tL` and record, for each node, the gradient
# that reached its output: a dict from the node's name (`step.node.name`) to that gradient as
# a float (`step.grad_outputs[0]`). The check compares it with $g_L$, $g_e$ and $g_d$ from the
# hand computation at the top.

# %%
ta.grad = tb.grad = tc.grad = None
stepper = viz.BackwardStepper(tL, params={"a": ta, "b": tb, "c": tc})
# Exercise 1.2: received = {node name: the gradient that reached its output, as a float}
### BEGIN SOLUTION
received = {}
for step in stepper:
    print(step)
    received[step.node.name] = float(step.grad_outputs[0])
### END SOLUTION

# %%
# Check Exercise 1.2: the engine's steps against the hand-computed gradients.
assert received == {"PowBackward": g_L, "AddBackward": g_e, "MulBackward": g_d}, received
assert (ta.grad, tb.grad, tc.grad) == (g_a, g_b, g_c), "stepping to the end gives .grad"

# %% [markdown]
# **Question:** `MulBackward` saves `a` and `b` (8 bytes, but the leaves' own data, so no new
# memory) and `AddBackward` nothing. Why does each keep what it keeps, and why does an add
# need nothing from its forward?
# <!-- ANSWER: Mul keeps a and b (two float32 scalars), since d(ab)/da = b and d(ab)/db = a;
# the derivatives of a + c are 1 whatever the inputs, so Add's backward passes g on as it is. -->

# %% [markdown]
# ## Fan-out: gradients add up
#
# When a value feeds several ops, its gradient is the **sum** of what each use sends back.
# In $f(x) = x \cdot x + 3x$, $x$ is used three times, and $f'(x) = 2x + 3$.

# %%
x = tf.tensor(4.0, requires_grad=True)
f = x * x + x * 3
f.backward()
print(f"f'(4) = {x.grad} (expected {2 * 4 + 3})")

# %% [markdown]
# ## Derivatives of a whole curve
#
# With arrays, one backward gives the derivative at every point at once (each output depends on
# its own input only). Here $f(x) = \tanh(x) \cdot x$, against the derivative we work out by hand:
# $f'(x) = \tanh(x) + x (1 - \tanh^2 x)$.

# %%
xs = tf.Tensor(np.linspace(-3, 3, 200), requires_grad=True)
ys = xs.tanh() * xs
ys.sum().backward()
by_hand = np.tanh(xs.data) + xs.data * (1 - np.tanh(xs.data) ** 2)
assert np.allclose(xs.grad, by_hand)

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(xs.data, ys.data, label="f(x) = x tanh(x)")
ax.plot(xs.data, xs.grad, label="f'(x) from backward")
ax.plot(xs.data[::12], by_hand[::12], "k.", label="f'(x) by hand")
ax.axhline(0, color="gray", lw=0.5)
ax.legend()
ax.set_title("One backward pass, 200 derivatives")
plt.show()

# %% [markdown]
# ## Deep graphs
#
# Because the sort is iterative, a chain of 10,000 ops is fine. (`math.prod` of the local
# derivatives is the chain rule spelled out.) In float64, so that 10,000 roundings stay small.

# %%
x = tf.tensor([1.0], dtype="float64", requires_grad=True)
y = x
for _ in range(10_000):
    y = y * 1.0001
y.sum().backward()
print(x.grad, "vs", math.prod([1.0001] * 10_000))

# %% [markdown]
# Next: how do we know a `backward` is right? Notebook 2 checks it against finite differences.
