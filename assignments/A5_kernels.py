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
# `tinyformer/course/assignments/a5/kernels.py`, and its forward again as a CUDA kernel, in
# `tinyformer/course/assignments/a5/softmax.cu`:
#
# | task | function | what to write |
# |---|---|---|
# | A5.1 | `_forward_rows(x, y)` | per row: the max, the exponentials and their sum, the scaling |
# | A5.2 | `_backward_rows(gy, y, gx)` | per row: `gx = y * (gy - sum(gy * y))` |
# | A5.3 | `a5_softmax_row(x, y, cols)` in CUDA C | the same three passes, one block per row |
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
# `NUMBA_DISABLE_JIT=1`. Restart the kernel after editing the file. A5.3 needs no GPU: its
# section below runs the CUDA kernel on tinyformer's CPU emulator. Grade yourself from the root
# of this folder:
#
#     tinyformer grade A5 .

# %%
import numpy as np

import tinyformer.cuda
from tinyformer import registry
from tinyformer.backend import to_device, to_host
from tinyformer.bench import median_time
from tinyformer.course import workspace
from tinyformer.course.assignments.a5 import cuda as softmax_cuda
from tinyformer.course.assignments.a5.kernels import softmax_backward, softmax_forward
from tinyformer.kernels.cuda import _nvrtc
from tinyformer.ops.softmax import softmax_backward as reference_backward
from tinyformer.ops.softmax import softmax_forward as reference_forward

# Stops here, loudly, if `import tinyformer` loads another folder than the one this notebook
# is in (say, another release that you installed later).
workspace.check()

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
cases = []  # the inputs, each with what the kernel and the reference gave
### BEGIN SOLUTION
for dtype in (np.float32, np.float64):
    big = (rng.standard_normal((16, 48)) * 1e4).astype(dtype)
    big[3, ::4] = -np.inf
    for a in (big, big[:, ::2], big.reshape(4, 4, 48)):
        cases.append((a, softmax_forward(a), reference_forward(a)))
### END SOLUTION
kinds = {(a.dtype, a.ndim, a.flags.c_contiguous) for a, _, _ in cases}
assert len(kinds) >= 6, f"float32 and float64, each strided and 3-D: only {kinds}"
assert any(np.isinf(a).any() and np.abs(a[np.isfinite(a)]).max() > 1e3 for a, _, _ in cases)
for a, got, want in cases:
    tol = 1e-6 if a.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)
    assert (got[np.isneginf(a)] == 0).all()  # a masked score gets probability exactly 0
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

# %% [markdown]
# ## A5.3 The forward kernel in CUDA
#
# A GPU runs thousands of threads, and a CUDA kernel says what **one** of them does.
# `tinyformer/course/assignments/a5/softmax.cu` opens with the plan: one **block** per row
# (`blockIdx.x` is the row), its threads striding over the row's columns (thread `t` takes
# columns `t`, `t + blockDim.x`, ...), so that a warp's 32 threads read 32 neighbours at once.
# You write the body of `a5_softmax_row`, in place of the line `// TODO A5.3: ...`:
#
# 1. each thread's running max over its columns, then `block_max` (from
#    `kernels/cuda/common.cuh`: warp shuffles, then shared memory), which every thread gets back;
# 2. `e = exp(x - max)` written to `y`, each thread summing its `e`'s, then `block_sum`;
# 3. `y *= 1 / sum`.
#
# Start the max from `-TF_INF` (NVRTC has no `INFINITY`), accumulate in `T` (float for
# float32, double for float64), and compute the row's offset as `long long`: rows x cols can
# pass 2^31. Tutorial 17 (`tutorials/17_your_first_cuda_kernel.py`) builds this kernel step by
# step; `docs/cuda-kernels.md` explains how tinyformer's own CUDA kernels are written.
#
# The wrapper `tinyformer/course/assignments/a5/cuda.py` is given: it launches one block per row, of
# `threads(cols)` threads (a multiple of 32, at most 256), and registers itself as the "cuda"
# kernel of `"softmax.forward"`. The input decides where the kernel runs: a CuPy array on the
# GPU; an array of the **fake device** (`to_device(x, "fake")`) on the CPU **emulator**, which
# compiles your `.cu` with the host's C++ compiler and runs every CUDA thread as an OS thread,
# with real barriers and shuffles: slow, but the indexing and the reductions are the GPU's. The
# grader runs it there on every machine, and on the GPU too where there is one. The wrapper
# reads the `.cu` at every call: after an edit, rerun the cell, no restart.

# %%
device = "cuda" if tinyformer.cuda.is_available() else "fake"  # fake: the CPU emulator
x = rng.standard_normal((8, 300)).astype(np.float32)  # rows longer than a block of 256
y_dev = softmax_cuda.softmax_forward(to_device(x, device))
err = np.abs(to_host(y_dev) - reference_forward(x)).max()
print(f"on {device}: {y_dev.dtype} {y_dev.shape}, max abs error vs the reference {err:.1e}")
with registry.prefer("cuda"):  # the registry runs your kernel for device arrays
    print(registry.explain("softmax.forward", device=device))

# %% [markdown]
# NVRTC, the compiler CuPy uses on a GPU, needs no GPU itself: it compiles your source to a
# cubin, the machine code of one GPU generation (`sm_80`: A100; `sm_90`: H100/H200). It
# rejects some of what the emulator's C++ compiler accepts (`INFINITY`, for one), so compile
# with it before you take the kernel to a GPU; the grader does. It comes from the pip package
# `nvidia-cuda-nvrtc` (a dev dependency of tinyformer).

# %%
try:
    for arch in _nvrtc.ARCHITECTURES:
        cubin = _nvrtc.compile_cuda(softmax_cuda.source(), softmax_cuda.SOURCE.name, arch=arch)
        print(f"{arch}: a cubin of {len(cubin):,} bytes")
except (_nvrtc.NvrtcUnavailable, OSError) as error:
    print(f"NVRTC is not available here, so nothing was compiled: {error}")

# %% [markdown]
# **Exercise.** Prove the CUDA kernel equal to the reference on the device where it is
# hardest: logits of ±1e4, a row with -inf entries (probability exactly 0), rows of 1 column,
# of 31 columns (less than a warp) and of 1000 (four columns per thread), in float32 and
# float64.

# %%
cases = []  # the inputs, each with what the CUDA kernel and the reference gave
### BEGIN SOLUTION
for dtype in (np.float32, np.float64):
    big = (rng.standard_normal((4, 1000)) * 1e4).astype(dtype)
    big[2, ::5] = -np.inf
    for cols in (1, 31, 1000):
        a = np.ascontiguousarray(big[:, :cols] if cols > 1 else big[[0, 1, 3], :1])
        got = to_host(softmax_cuda.softmax_forward(to_device(a, device)))
        cases.append((a, got, reference_forward(a)))
### END SOLUTION
assert {a.shape[-1] for a, _, _ in cases} >= {1, 31, 1000}, "rows of 1, 31 and 1000 columns"
assert {a.dtype for a, _, _ in cases} == {np.dtype(np.float32), np.dtype(np.float64)}
assert any(np.isneginf(a).any() for a, _, _ in cases), "a row with -inf entries"
for a, got, want in cases:
    tol = 1e-6 if a.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)
    assert (got[np.isneginf(a)] == 0).all()  # a masked score gets probability exactly 0
print("the CUDA kernel equals the reference on huge, masked, short and long rows")

# %% [markdown]
# **Question:** a row of 16 columns gets one warp of 32 threads, not 256: what would the other
# 224 threads do, and what would they cost on a GPU? And why may thread 5 not start pass 2
# before every thread has finished pass 1, although it never reads another thread's columns?
