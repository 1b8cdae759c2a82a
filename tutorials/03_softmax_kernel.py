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
# # 3. From the NumPy softmax to a fused Numba kernel
#
# Every hot op in tinyformer has a NumPy **reference**: short, vectorised, obviously right.
# It is also slow in a particular way: each NumPy call makes a full pass over memory and
# allocates a temporary. A **kernel** does the same math in one loop that touches each element
# as few times as possible. Here we write one for softmax, check it against the reference, and
# time both.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
from numba import njit, prange

from tinyformer import registry
from tinyformer.bench import median_time
from tinyformer.ops.softmax import softmax_forward as reference

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))  # CI runs this notebook with small sizes
rng = np.random.default_rng(0)

# %% [markdown]
# ## The reference, and what it costs
#
# The reference (`softmax_forward` in `tinyformer/ops/softmax.py`, which assignment A2.1 asks
# you to write) is a few vectorised NumPy calls over the whole (rows, D) array. Each call is
# one pass over memory, and each intermediate result a new array: the row maxima, the shifted
# scores, their exponentials, the row sums and the output make five passes and three arrays
# as big as the input. For attention scores of a
# small GPT (batch 12, 4 heads, 64 x 64) that is 196,608 elements per pass.

# %%
x = rng.standard_normal((12 * 4 * 64, 64)).astype(np.float32)
y_ref = reference(x)
print(y_ref.shape, y_ref.dtype, "rows sum to 1:", np.allclose(y_ref.sum(-1), 1))

# %% [markdown]
# ## A first kernel: loops, compiled
#
# `@njit` compiles a Python function to machine code the first time it is called with given
# types. Loops are fine there; they are the point. Per row: find the max, exponentiate and sum,
# normalise. The row (64 floats) stays in L1 cache between the three loops.


# %%
@njit
def softmax_loops(x):
    y = np.empty_like(x)
    # A5.1 asks for a kernel like this: releases and the students' site stub it.
    ### BEGIN SOLUTION A5.1 a first kernel, in the tutorial
    for i in range(x.shape[0]):
        row, out = x[i], y[i]  # 1-D views: simpler for the compiler to vectorise than x[i, j]
        top = row.max()
        total = 0.0
        for j in range(row.size):
            out[j] = np.exp(row[j] - top)
            total += out[j]
        for j in range(row.size):
            out[j] /= total
    ### END SOLUTION
    return y


y = softmax_loops(x)
np.testing.assert_allclose(y, y_ref, rtol=1e-5, atol=1e-7)
print("matches the reference; dtype", y.dtype)

# %% [markdown]
# ## The float32 trap
#
# It works, but look at `total = 0.0`. A Python float is a float64, so `total += out[j]` adds in
# float64: every element is converted, and the loop cannot use float32 vector instructions.
# Numba tells us the type it inferred for each variable:

# %%
types = softmax_loops.overloads[softmax_loops.signatures[0]].type_annotation.typemap
print("total:", types["total"], "| row:", types["row"])

# %% [markdown]
# The fix is to make the accumulator the array's own type: `x.dtype.type(0)`. Then we also run
# rows in parallel (`prange`, `parallel=True`) and let LLVM reorder sums (`fastmath`).
# tinyformer uses an explicit set of fast-math flags without `nnan` and `ninf`, because masked
# softmax relies on `-inf` behaving exactly.

# %%
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


@njit(parallel=True, fastmath=FASTMATH)
def softmax_fused(x):
    y = np.empty_like(x)
    # A5.1 asks for this kernel: releases and the students' site stub it; the lecture shows it.
    ### BEGIN SOLUTION A5.1 the fused kernel, in the tutorial
    for i in prange(x.shape[0]):
        row, out = x[i], y[i]
        top = row.max()
        total = x.dtype.type(0)  # float32 stays float32
        for j in range(row.size):
            e = np.exp(row[j] - top)
            out[j] = e
            total += e
        inv = x.dtype.type(1) / total
        for j in range(row.size):
            out[j] *= inv
    ### END SOLUTION
    return y


np.testing.assert_allclose(softmax_fused(x), y_ref, rtol=1e-5, atol=1e-7)
print("matches the reference")

# %% [markdown]
# ## Two passes instead of three: the online max and sum
#
# `softmax_fused` still reads each row three times: once for the max, once to exponentiate and
# sum, once to normalise. Milakov and Gimelshein (2018) merge the first two. Keep a running max
# `top` and a running sum `total` of `exp(row[j] - top)`; when a new element is larger than
# `top`, every term summed so far was taken against the old max, so rescale the sum by
# `exp(old_top - new_top)` before adding the new term (which is `exp(0) = 1`). After one pass,
# `top` is the row's max and `total` the softmax denominator. FlashAttention is built on the
# same update.
#
# **Exercise 3.1** — write pass 1 of `softmax_online`: one loop over `row` (a float32 vector
# of length D) that leaves the row's max in `top` and the sum of `exp(row[j] - top)` in `total`,
# both float32 (start from `row.dtype.type(-np.inf)` and `row.dtype.type(0)`). Pass 2 is
# written. The check cell compares the result, (rows, D) like `x`, with the NumPy reference:
# your largest absolute error should be below 1e-6, also on rows of large logits (x 100)
# whose `exp` would overflow without the max.


# %%
@njit(parallel=True, fastmath=FASTMATH)
def softmax_online(x):
    y = np.empty_like(x)
    for i in prange(x.shape[0]):
        row, out = x[i], y[i]
        # Exercise 3.1: pass 1, one loop: the running max `top` and the running sum `total` of
        # exp(row[j] - top), rescaled whenever `top` grows.
        ### BEGIN SOLUTION A5.1 the online softmax, in the tutorial
        top = row.dtype.type(-np.inf)
        total = row.dtype.type(0)
        for j in range(row.size):
            if row[j] > top:
                total = total * np.exp(top - row[j]) + row.dtype.type(1)
                top = row[j]
            else:
                total += np.exp(row[j] - top)
        ### END SOLUTION
        inv = row.dtype.type(1) / total  # pass 2: exponentiate and normalise
        for j in range(row.size):
            out[j] = np.exp(row[j] - top) * inv
    return y


y_online = softmax_online(x)

# %%
# Check Exercise 3.1: against the NumPy reference, on x and on 100 x (large logits).
for name, a in (("x", x), ("100 x", 100 * x)):
    y_mine, y_want = softmax_online(a), reference(a)
    err = np.abs(y_mine - y_want).max()
    print(f"{name:6s} max abs error {err:.1e}; dtype {y_mine.dtype}")
    assert y_mine.dtype == np.float32, "Exercise 3.1: the output should stay float32"
    assert err < 1e-6, f"Exercise 3.1: softmax_online({name}) is off by {err:.1e}"

# %% [markdown]
# **Question:** what does your kernel return for a row whose entries are all `-inf` (a query
# whose every key is masked)? What would you want it to return, and where would you test for
# it?
# <!-- ANSWER: top stays -inf and total 0 (exp(-inf - -inf) is NaN in pass 2 anyway): the row
# comes out NaN. A fully masked row should give zeros, as tinyformer's attention does: test
# total == 0 (or top == -inf) once per row before pass 2. -->
#
# **Question:** for which order of the elements of a row does pass 1 call `exp` the most?
# Why is the online version still worth it for long rows that do not fit in cache?
# <!-- ANSWER: an increasing row rescales at every element (two exps each); the saving is a
# whole read of the row from memory, which costs more than the extra arithmetic once the
# rows outgrow the cache (and on a GPU, where memory traffic dominates). -->

# %% [markdown]
# ## Timing
#
# The median of several runs, after warm-up calls (the first call includes compilation). We add
# tinyformer's own kernel (`kernels/numba/softmax.py`), which also replaces `np.exp` by a
# vectorisable exp of its own (without Intel's SVML library, LLVM cannot vectorise a loop that
# calls libm's exp). The registry picks it; `prefer("numba")` makes that explicit.


# %%
def median_ms(fn, repeats=9):
    return 1e3 * median_time(fn, repeats)  # tinyformer.bench's: median after a warm-up


def tinyformer_kernel(a):
    with registry.prefer("numba"):
        return registry.call("softmax.forward", a)


print(registry.explain("softmax.forward"))
rows_list = [256, 1024, 4096] if SMALL else [256, 1024, 4096, 16384, 65536]
results = {"reference": [], "loops": [], "fused": [], "tinyformer": []}
for rows in rows_list:
    a = rng.standard_normal((rows, 64)).astype(np.float32)
    for name, fn in [
        ("reference", reference),
        ("loops", softmax_loops),
        ("fused", softmax_fused),
        ("tinyformer", tinyformer_kernel),
    ]:
        results[name].append(median_ms(lambda fn=fn, a=a: fn(a)))

for name, times in results.items():
    print(f"{name:11s}", "  ".join(f"{t:8.3f}" for t in times), "ms")

# %%
fig, ax = plt.subplots(figsize=(6.5, 3.8))
for name in ("loops", "fused", "tinyformer"):
    speedup = np.array(results["reference"]) / np.array(results[name])
    ax.plot(rows_list, speedup, "o-", label=name)
ax.axhline(1, color="gray", lw=0.8)
ax.set_xscale("log")
ax.set_xlabel("rows of 64 (float32)")
ax.set_ylabel("speedup over the NumPy reference")
ax.set_title("Softmax: one fused pass beats five NumPy passes")
ax.legend()
plt.show()

# %% [markdown]
# What the plot shows:
# - the plain loops **lose** to NumPy: one thread, a float64 accumulator, and a call to libm's
#   scalar `exp` for every element, while NumPy's `exp` uses SIMD instructions;
# - parallel rows and a float32 accumulator win about 2x;
# - tinyformer's kernel, whose `exp` is written to vectorise, wins 3 to 6x, and more as the array
#   outgrows the cache, where each of NumPy's extra passes costs a trip to memory.
#
# ## The rules tinyformer's kernels follow
#
# - A kernel registers the **same primitive name and signature** as its reference, and the
#   generic tests compare the two on random shapes, layouts and dtypes; a kernel that drifts by
#   a relative 1e-3 in a single element fails the suite.
# - `registry.prefer("numpy")` forces the reference everywhere: for teaching, and to find out
#   whether a kernel or the model is at fault.
# - To step through a kernel in a debugger, run with `NUMBA_DISABLE_JIT=1`: every `@njit`
#   function runs as plain Python.
# - See `docs/kernels.md` for the measured tables of every kernel.
