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
# # Assignment A5: a fused softmax kernel
#
# You write softmax over the last axis as two Numba kernels, in
# `tinyformer/course/a5_kernels.py`:
#
# | task | function | what to write |
# |---|---|---|
# | A5.1 | `_forward_rows(x, y)` | per row: the max, the exponentials and their sum, the scaling |
# | A5.2 | `_backward_rows(gy, y, gx)` | per row: `gx = y * (gy - sum(gy * y))` |
#
# The wrappers `softmax_forward` and `softmax_backward` are given: they lay any input out as
# C-contiguous rows and register the kernels with the registry as the "numba" backend of
# `"softmax.forward"` and `"softmax.backward"` (importing the module replaces tinyformer's own
# kernels for this session). Tutorial 3 (`tutorials/03_softmax_kernel.py`) builds such a kernel
# step by step; `docs/kernels.md` lists the traps.
#
# The grader compares your kernels with the NumPy references on random inputs of several
# shapes, in float32 and float64, C-ordered and strided (atol 1e-6, rtol 1e-5 in float32), then
# runs property tests. Keep float32 float32 inside the kernel: accumulate in `x.dtype.type(0)`,
# not `0.0`. To step through a kernel with a debugger or `print`, run with
# `NUMBA_DISABLE_JIT=1`. Restart the kernel after editing the file. Grade yourself from the root
# of this folder:
#
#     tinyformer grade A5 .

# %%
import numpy as np

from tinyformer import registry
from tinyformer.bench import median_time
from tinyformer.course.a5_kernels import softmax_backward, softmax_forward
from tinyformer.ops.softmax import softmax_backward as reference_backward
from tinyformer.ops.softmax import softmax_forward as reference_forward

rng = np.random.default_rng(0)

# %% [markdown]
# ## A5.1 The forward kernel
#
# Rows run in parallel (`prange`); within a row, three loops over a 1-D view `x[i]`. The first
# call compiles (about a second per dtype); later calls, and later sessions (`cache=True`), do
# not.

# %%
x = rng.standard_normal((512, 64)).astype(np.float32)
y = softmax_forward(x)
print(y.dtype, "max abs error vs the reference:", np.abs(y - reference_forward(x)).max())
print(registry.explain("softmax.forward"))  # your kernel, registered for float32 and float64

# %% [markdown]
# ## A5.2 The backward kernel
#
# One loop for the dot product `sum(gy * y)` of the row, one for `gx`.

# %%
gy = rng.standard_normal(x.shape).astype(np.float32)
gx = softmax_backward(gy, y)
print(gx.dtype, "max abs error vs the reference:", np.abs(gx - reference_backward(gy, y)).max())

# %% [markdown]
# **Exercise.** Prove the kernels equal to the references where it is hardest: logits of
# ±1e4 (the exponentials overflow unless the max is subtracted), rows with -inf entries (a
# masked score must get probability exactly 0), a strided input (`x[:, ::2]`) and a 3-D input,
# in float32 and float64.

# %%
### BEGIN SOLUTION
for dtype in (np.float32, np.float64):
    tol = 1e-6 if dtype == np.float32 else 1e-12
    big = (rng.standard_normal((16, 48)) * 1e4).astype(dtype)
    big[3, ::4] = -np.inf
    for a in (big, big[:, ::2], big.reshape(4, 4, 48)):
        np.testing.assert_allclose(softmax_forward(a), reference_forward(a), atol=tol, rtol=0)
    assert (softmax_forward(big)[3, ::4] == 0).all()
### END SOLUTION
print("the kernel equals the reference on huge, masked, strided and 3-D inputs")

# %% [markdown]
# ## Timing (not graded)
#
# The median of several runs after a warm-up call. Softmax reads and writes each element once:
# 2 x 4 bytes per float32 element is the least memory traffic any implementation can have, so
# GB/s against your machine's memory bandwidth says how close a kernel comes to the limit.

# %%
for rows in (1024, 16384):
    a = rng.standard_normal((rows, 64)).astype(np.float32)
    t_ref = median_time(lambda a=a: reference_forward(a))
    t_mine = median_time(lambda a=a: softmax_forward(a))
    gbs = 2 * a.nbytes / t_mine / 1e9
    print(f"({rows}, 64) float32: reference {1e3 * t_ref:.3f} ms, yours {1e3 * t_mine:.3f} ms "
          f"({t_ref / t_mine:.1f}x, {gbs:.1f} GB/s)")  # fmt: skip

# %% [markdown]
# **Question:** at which size does your kernel beat NumPy's five passes, and at which does it
# lose? What costs more than the memory traffic at (1024, 64), and what does tinyformer's own
# kernel (`kernels/numba/softmax.py`, tutorial 3's timing cell) do about `np.exp`?
