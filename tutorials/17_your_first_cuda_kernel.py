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
# # 17. Your first CUDA kernel: softmax, a row per block
#
# Tutorial 3 wrote softmax as a Numba loop: one CPU core per row, a few cores in all. A GPU
# has thousands of threads, and a CUDA kernel says what **one** of them does. Here we write
# softmax in CUDA C, as a Python string, in two steps:
#
# 1. one thread per row: the Numba loop, moved to a GPU thread;
# 2. one **block** of threads per row: each thread takes a few columns, and the threads combine
#    their maxima and sums with **warp shuffles** and **shared memory**.
#
# We compile the source with NVRTC, NVIDIA's runtime compiler, which needs no GPU; then run it:
# on a GPU through CuPy if this machine has one, else on tinyformer's CPU **emulator**, which
# runs every CUDA thread as a fiber, one at a time up to its next barrier (slow, but the indexing,
# shuffles and barriers are real). Last, what a GPU changes: launches, syncs, occupancy and memory
# coalescing.

# %%
import functools
import os
import re

import matplotlib.pyplot as plt
import numpy as np
import scipy.special
from matplotlib.patches import Rectangle

import tinyformer.cuda
from tinyformer import registry
from tinyformer.fake_device import to_fake
from tinyformer.kernels.cuda import _emulator, _nvrtc, _runtime
from tinyformer.ops.softmax import softmax_forward as reference

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))  # CI: shorter rows for the long-row checks
ON_GPU = tinyformer.cuda.is_available()  # CuPy and an NVIDIA GPU; else the CPU emulator
rng = np.random.default_rng(0)
print("running kernels on", "the GPU (CuPy)" if ON_GPU else "the CPU emulator (no GPU here)")

# %% [markdown]
# ## Threads, blocks and a grid
#
# A kernel launch starts a **grid** of **blocks**; each block is a group of up to 1024
# **threads** that run on one streaming multiprocessor (SM), can share a small fast memory
# (**shared memory**) and can wait for each other (`__syncthreads()`). A block runs as
# **warps** of 32 consecutive threads that execute each instruction together. Inside the
# kernel, every thread reads where it is from four built-in variables:
#
# ```
# grid:   gridDim.x blocks           blockIdx.x  = 0, 1, ..., gridDim.x - 1
# block:  blockDim.x threads         threadIdx.x = 0, 1, ..., blockDim.x - 1
#
#  block 0                       block 1                       block 2
# [t0 t1 ... t31|t32 ... t63]   [t0 t1 ... t31|t32 ... t63]   [t0 ...
#  \-- warp 0 -/ \- warp 1 -/
#
# one thread per row:  row = blockIdx.x * blockDim.x + threadIdx.x   (its global index)
# one block per row:   row = blockIdx.x; the block's threads split the row's columns:
#                      thread t takes columns t, t + blockDim.x, t + 2 blockDim.x, ...
# ```
#
# The figure shows, for 6 rows of 40 columns and blocks of 32 threads, which thread reads
# each element, and (boxed) the elements that warp 0 loads with its **first** load
# instruction. One thread per row makes the 32 threads of a warp read addresses a whole row
# apart; one block per row makes them read 32 neighbours: a single 128-byte piece of memory.
# That difference, **coalescing**, comes back at the end.


# %%
def who_reads(rows: int, cols: int, block: int, per_row: str) -> np.ndarray:
    """(rows, cols) array of the thread (within its block) that reads each element."""
    if per_row == "thread":
        return np.repeat(np.arange(rows) % block, cols).reshape(rows, cols)
    return np.tile(np.arange(cols) % block, (rows, 1))  # stride loop: column j -> thread j % block


fig, axes = plt.subplots(1, 2, figsize=(12, 3))
for ax, per_row, first_load in [
    (axes[0], "thread", (-0.5, -0.5, 1, 6)),  # warp 0's first load: column 0 of every row
    (axes[1], "block", (-0.5, -0.5, 32, 1)),  # row 0, columns 0-31
]:
    owner = who_reads(6, 40, 32, per_row)
    top = owner.max()
    ax.imshow(owner, cmap="viridis", vmin=0, vmax=top, aspect="auto")
    for (i, j), t in np.ndenumerate(owner):
        ax.text(j, i, t, ha="center", va="center", fontsize=5.5, color="w" if t < top / 2 else "k")
    ax.add_patch(Rectangle(first_load[:2], *first_load[2:], fill=False, ec="red", lw=2))
    ax.set_title("one thread per row" if per_row == "thread" else "one block of 32 per row")
    ax.set_xlabel("column")
    ax.set_ylabel("row")
fig.suptitle("threadIdx.x of the thread that reads each element; red: warp 0's first load")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Version 1: one thread per row
#
# The Numba loop of tutorial 3, as CUDA C. `extern "C"` keeps the name unmangled, so that we
# can look the kernel up by name; `__global__` marks a function the host launches. Pointers
# point at GPU memory. The grid has `ceil(rows / blockDim.x)` blocks, so the last block may
# have threads with no row: they return at once. Offsets are `long long` because
# `rows * cols` can pass 2^31 on big arrays, where an `int` would wrap around.

# %%
SOFTMAX_ROWS = r"""
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;   // this thread's row
    if (i >= rows) return;                           // the last block may overhang
    const float* xr = x + (long long)i * cols;
    float* yr = y + (long long)i * cols;
    float top = xr[0];
    for (int j = 1; j < cols; ++j) top = fmaxf(top, xr[j]);
    float total = 0.0f;                              // 0.0f: a float, 0.0 would be a double
    for (int j = 0; j < cols; ++j) {
        float e = expf(xr[j] - top);
        yr[j] = e;
        total += e;
    }
    float inv = 1.0f / total;
    for (int j = 0; j < cols; ++j) yr[j] *= inv;
}
"""

# %% [markdown]
# ## Compiling with NVRTC, on any machine
#
# NVRTC turns CUDA C into a **cubin**, the machine code of one GPU generation (`sm_90`:
# H100/H200; `sm_80`: A100). It needs neither a GPU nor a driver: it comes from the pip
# package `nvidia-cuda-nvrtc`, and tinyformer's CI uses it to catch a broken kernel before any
# GPU sees it. CuPy calls the same compiler when it loads a kernel on a GPU.


# %%
def nvrtc(source: str, name: str, arch: str = "sm_90") -> bytes | None:
    """The cubin of `source`, or None (and a note) where NVRTC is not installed."""
    try:
        return _nvrtc.compile_cuda(source, name, arch=arch)
    except (_nvrtc.NvrtcUnavailable, OSError) as error:
        print(f"NVRTC is not available here, so {name} was not compiled: {error}")
        return None


for arch in ("sm_80", "sm_90"):
    cubin = nvrtc(SOFTMAX_ROWS, "my_softmax.cu", arch=arch)
    if cubin is not None:
        print(f"{arch}: a cubin of {len(cubin):,} bytes, an ELF file: {cubin[:4]!r}")

# %% [markdown]
# A compile error is reported with the file, the line and a caret. NumPy code starts a
# running max from `-np.inf`; the C habit is `-INFINITY` from `<math.h>`, which NVRTC does not
# provide:

# %%
broken = SOFTMAX_ROWS.replace("float top = xr[0];", "float top = -INFINITY;")
try:
    nvrtc(broken, "my_softmax.cu")
except _nvrtc.CompileError as error:
    print(error)

# %% [markdown]
# The fix is the bit pattern of +inf, `__int_as_float(0x7f800000)`: tinyformer's kernels
# spell it `TF_INF` (in `kernels/cuda/common.cuh`); below we call it `NEG_INF` with the sign.
#
# ## Running it: a GPU, or the emulator
#
# On a GPU, CuPy compiles the source (`cupy.RawModule`), copies arrays to GPU memory and
# launches with `(grid,), (block,), args`. Without one, tinyformer's emulator compiles the
# same source with the host's C++ compiler against `kernels/cuda/_emulator.h`, a header that
# plays `threadIdx`, `__syncthreads`, `__shfl_xor_sync` and friends on the CPU; the kernel then
# reads and writes our NumPy arrays in place. The helper below hides the difference; scalar
# arguments are cast to the types the kernel declares (a Python `100` for an `int cols` must
# arrive as 4 bytes, not 8).


# %%
@functools.cache
def build(source: str):
    """`source` compiled for wherever kernels run here (cached per source text)."""
    if ON_GPU:
        import cupy

        return cupy.RawModule(code=source, options=("-std=c++17",))
    return _emulator.compile_module(source, _runtime.entries(source), "tutorial17")


def launch(source: str, name: str, grid: int, block: int, *args) -> None:
    """Run kernel `name` of `source` on `grid` blocks of `block` threads. NumPy arrays are the
    pointer arguments (on a GPU: copied there and back, which syncs; fine for a tutorial)."""
    params = _runtime.entries(source)[name].params
    assert all(a.flags.c_contiguous for a in args if isinstance(a, np.ndarray))
    values = [
        a if p.type == "pointer" else _runtime.SCALARS[p.type](a) for a, p in zip(args, params)
    ]
    if not ON_GPU:
        build(source).launch(name, (grid, 1, 1, block, 1, 1), values)
        return
    import cupy

    on_gpu = [cupy.asarray(v) if isinstance(v, np.ndarray) else v for v in values]
    build(source).get_function(name)((grid,), (block,), tuple(on_gpu))
    for host, device in zip(values, on_gpu):
        if isinstance(host, np.ndarray):
            host[...] = device.get()


x = rng.standard_normal((64, 100)).astype(np.float32)
rows, cols = x.shape
y = np.full_like(x, np.nan)  # NaN: an element the kernel forgets to write shows up
block = 32
launch(SOFTMAX_ROWS, "softmax_rows", -(-rows // block), block, x, y, rows, cols)
err = np.abs(y - reference(x)).max()
print(f"{-(-rows // block)} blocks of {block} threads; max abs difference from NumPy {err:.1e}")

# %% [markdown]
# It is right, and on a GPU it would be slow: only `rows` threads work (a GPU wants tens of
# thousands), each walks its row alone three times, and a warp's loads are scattered (the
# left panel above). Next, all the threads of a block share a row.
#
# **Question:** why subtract the row's maximum before `expf`? What would this kernel return,
# without it, for a row holding the logit 100?
# <!-- ANSWER: softmax is unchanged by a shift, and with the max subtracted every exponent is
# <= 0, so expf stays in (0, 1]. expf(100) overflows float32 (max ~3.4e38 = e^88.7) to inf;
# 1 / inf is 0: the element holding 100 comes out inf * 0 = NaN, every other one 0. -->
#
# ## Reducing across a warp: the butterfly
#
# A block needs the row's max and sum, but each thread holds only part of the row. Within a
# warp, `__shfl_xor_sync(0xffffffff, v, offset)` gives every lane the `v` of lane
# `lane ^ offset`, register to register, with no memory involved (the mask `0xffffffff` says
# all 32 lanes take part). Combining with the partner at offsets 16, 8, 4, 2, 1 leaves
# **every** lane with the warp's result after five steps. With 8 lanes (offsets 4, 2, 1):
#
# ```
# lane                        0  1  2  3  4  5  6  7
# values                      3  1  4  1  5  9  2  6
# offset 4 (pairs 0-4, 1-5..)  5  9  4  6  5  9  4  6
# offset 2 (pairs 0-2, 1-3..)  5  9  5  9  5  9  5  9
# offset 1 (pairs 0-1, 2-3..)  9  9  9  9  9  9  9  9
# ```
#
# **Exercise 17.1** — write `warp_max(float v)`, a `__device__` function (callable from a
# kernel) that returns the maximum of `v` over the 32 lanes of the warp, to every lane: a loop
# over the offsets 16, 8, 4, 2, 1 with `__shfl_xor_sync` and `fmaxf`. Put its CUDA source in
# the string `WARP_MAX`. The check cell launches one warp whose lanes hold 32 different
# numbers and expects every lane to return their maximum.

# %%
# Exercise 17.1: WARP_MAX, the source of `__device__ float warp_max(float v)`.
### BEGIN SOLUTION
WARP_MAX = r"""
__device__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}
"""
### END SOLUTION

# %%
# Check Exercise 17.1: every lane of one warp gets the maximum of the 32 values.
WARP_TEST = (
    WARP_MAX
    + r"""
extern "C" __global__ void warp_max_test(const float* x, float* out) {
    out[threadIdx.x] = warp_max(x[threadIdx.x]);
}
"""
)
lanes = rng.permutation(32).astype(np.float32) - 40  # all negative: 0 is never the answer
out = np.zeros(32, np.float32)
launch(WARP_TEST, "warp_max_test", 1, 32, lanes, out)
print("each lane's result:", out.astype(int))
assert (out == lanes.max()).all(), "Exercise 17.1: not every lane holds the warp's maximum"
assert nvrtc(WARP_TEST, "warp_max.cu") != b"", "Exercise 17.1: NVRTC made an empty cubin"

# %% [markdown]
# ## Reducing across a block: shared memory and `__syncthreads`
#
# A block of 128 threads is 4 warps. After `warp_max`, lane 0 of each warp posts its warp's
# result in a `__shared__` array (one copy per block, visible to all its threads); after a
# barrier, every thread reads the (at most 32) posts and reduces them with one more butterfly.
# The two barriers do different jobs:
#
# - the one **after** the posts: nobody reads `partial` before every warp has written it;
# - the one **before** them: a thread must not overwrite `partial` while a slower warp is still
#   reading it from the previous call (the kernel calls `block_max`, then `block_sum`).
#
# The sum is the same butterfly with `+`. Both helpers assume `blockDim.x` is a multiple of 32.

# %%
REDUCTIONS = (
    r"""
#define NEG_INF (-__int_as_float(0x7f800000))  // NVRTC has no INFINITY

__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}
"""
    + WARP_MAX
    + r"""
__device__ float block_max(float v) {
    __shared__ float partial[32];                  // one slot per warp (at most 32 warps)
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_max(v);
    __syncthreads();                               // the previous call's readers are done
    if (lane == 0) partial[warp] = v;
    __syncthreads();                               // every warp has posted
    return warp_max(lane < blockDim.x / 32 ? partial[lane] : NEG_INF);
}

__device__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    return warp_sum(lane < blockDim.x / 32 ? partial[lane] : 0.0f);
}
"""
)

# %% [markdown]
# ## Version 2: one block per row
#
# Block `blockIdx.x` owns row `blockIdx.x`; thread `t` owns column `t`. Threads past the end of
# the row still take part in the reductions (every thread must reach every `__syncthreads`),
# with the neutral values: `-inf` for the max, `0` for the sum. For now a row must fit in the
# block: `cols <= blockDim.x`.

# %%
SOFTMAX_BLOCK = (
    REDUCTIONS
    + r"""
extern "C" __global__ void softmax_block(const float* x, float* y, int cols) {
    long long row = (long long)blockIdx.x * cols;
    int j = threadIdx.x;
    float v = j < cols ? x[row + j] : NEG_INF;
    float top = block_max(v);
    float e = j < cols ? expf(v - top) : 0.0f;
    float total = block_sum(e);
    if (j < cols) y[row + j] = e / total;
}
"""
)


def softmax_cuda(source: str, name: str, x: np.ndarray, block: int) -> np.ndarray:
    """Launch a one-block-per-row kernel `name(x, y, cols)` on x (rows, cols); return y."""
    y = np.full_like(x, np.nan)
    launch(source, name, x.shape[0], block, x, y, x.shape[1])
    return y


y = softmax_cuda(SOFTMAX_BLOCK, "softmax_block", x, block=128)
err = np.abs(y - reference(x)).max()
print(f"{rows} blocks of 128 threads; max abs difference from NumPy {err:.1e}")
wide = rng.standard_normal((8, 300)).astype(np.float32)
y = softmax_cuda(SOFTMAX_BLOCK, "softmax_block", wide, block=128)
first = np.isnan(y).any(axis=0).argmax()
print(f"rows of 300, blocks of 128: columns {first}+ never written;", end=" ")
print("columns 0-127 sum to", y[:, :128].sum(-1).round(4)[:3], "...")

# %% [markdown]
# **Question:** what goes wrong if a block has 48 threads, not a multiple of 32? Look at
# `warp_sum` for the second warp (16 threads), and at `lane < blockDim.x / 32` in
# `block_sum`.
# <!-- ANSWER: the second warp is partial: the mask 0xffffffff names lanes 16-31 that do not
# exist, which is undefined on a GPU (the emulator lets a lane whose partner is missing read
# its own value, so warp_sum doubles it). And blockDim.x / 32 = 1, so the second warp's partial
# is never read: the max and sum miss 16 threads' values. Round blocks up to a multiple of 32
# and let the extra threads carry the neutral value. -->
#
# ## Rows longer than the block
#
# Rows of 300 columns on blocks of 128 threads leave columns 128 and up unwritten, and the
# first 128 are normalised over themselves alone. The cure is the **stride loop** of the
# figure: thread `t` takes columns `t, t + blockDim.x, t + 2 blockDim.x, ...`, keeps a
# running max (then a running sum) of its own columns, and only then joins the block
# reduction. Consecutive threads still read consecutive addresses at every step of the loop.
#
# **Exercise 17.2** — write the kernel `softmax_strided(const float* x, float* y, int cols)`:
# one block per row, any `cols >= 1`, any `blockDim.x` that is a multiple of 32. Three stride
# loops: each thread's max, then `block_max`; `e = expf(x - top)` written to `y` and each
# thread's sum, then `block_sum`; finally `y *= 1 / sum`. Put `REDUCTIONS` plus your kernel in
# the string `SOFTMAX_STRIDED`. The check runs rows shorter than, equal to and longer than
# the block, and a row of one column.

# %%
# Exercise 17.2: SOFTMAX_STRIDED = REDUCTIONS + the source of `softmax_strided`.
### BEGIN SOLUTION A5.3 the block softmax, in the tutorial
SOFTMAX_STRIDED = (
    REDUCTIONS
    + r"""
extern "C" __global__ void softmax_strided(const float* x, float* y, int cols) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float top = NEG_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) top = fmaxf(top, xr[j]);
    top = block_max(top);
    float total = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float e = expf(xr[j] - top);
        yr[j] = e;
        total += e;
    }
    float inv = 1.0f / block_sum(total);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] *= inv;
}
"""
)
### END SOLUTION

# %%
# Check Exercise 17.2: short, exact-fit, long and one-column rows, against the reference.
long_cols = 300 if SMALL else 1000
for shape, block in [((8, 100), 128), ((8, 64), 64), ((8, long_cols), 64), ((4, 1), 32)]:
    a = 3 * rng.standard_normal(shape).astype(np.float32)
    err = np.abs(softmax_cuda(SOFTMAX_STRIDED, "softmax_strided", a, block) - reference(a)).max()
    print(f"{str(shape):10s} blocks of {block:3d}: max abs difference {err:.1e}")
    assert err < 1e-6, f"Exercise 17.2: {shape} with blocks of {block} is off by {err:.1e}"
assert nvrtc(SOFTMAX_STRIDED, "softmax_strided.cu") != b"", "Exercise 17.2: empty cubin"

# %% [markdown]
# ## tinyformer's own kernel
#
# `kernels/cuda/softmax.cu` is the kernel you just wrote, templated on the element type (one
# entry point for float32, one for float64), with the helpers from `common.cuh`. Its comment
# block says what every thread, warp and block does and what the memory traffic is:

# %%
kernel_file = _runtime.HERE / "softmax.cu"
lines = kernel_file.read_text().splitlines()
print("\n".join(line for line in lines if line.startswith("//")))
cubin = nvrtc(_runtime.source("softmax"), "softmax.cu")  # common.cuh inlined
if cubin is not None:
    print(f"\nsoftmax.cu for sm_90: a cubin of {len(cubin):,} bytes")

# %% [markdown]
# The registry decides what runs for `softmax.forward`. On the **fake device** (host memory
# dressed as a GPU, see `tinyformer/fake_device.py`) the references run, unless `cuda` is
# preferred: then the `.cu` kernels run on the emulator. That is how CI checks every CUDA
# kernel against its NumPy reference. Its Python wrapper (`kernels/cuda/softmax.py`) launches
# one block per row with 32 to 256 threads, fewer for short rows (`_rows.row_threads`).

# %%
device = "cuda" if ON_GPU else "fake"
with registry.prefer("cuda"):
    print(registry.explain("softmax.forward", "float32", device))
    if ON_GPU:
        import cupy

        y_tf = registry.call("softmax.forward", cupy.asarray(x)).get()
    else:
        y_tf = registry.call("softmax.forward", to_fake(x)).get()
print(
    f"tinyformer's kernel on {device}: max abs difference {np.abs(y_tf - reference(x)).max():.1e}"
)

# %% [markdown]
# ## A log-softmax kernel
#
# Cross-entropy needs `log(softmax(x))`. The log of a float32 softmax is `-inf` wherever the
# softmax underflowed to 0 (a logit about 104 or more below the row's max: `exp(-104)` is
# below float32's smallest number); computed directly,
# `log_softmax(x) = x - max - log(sum(exp(x - max)))` stays finite, and needs no division.
#
# **Exercise 17.3** — write `log_softmax_strided(const float* x, float* y, int cols)`, one
# block per row with stride loops like Exercise 17.2, writing `y = x - top - logf(total)`.
# Two passes suffice: the max, then the sum of `expf(x - top)` (nothing stored), then write
# `y`. Put `REDUCTIONS` plus your kernel in `LOG_SOFTMAX`. The check compares with NumPy on
# ordinary logits and on logits of several hundred, where `log(softmax)` would give `-inf`.

# %%
# Exercise 17.3: LOG_SOFTMAX = REDUCTIONS + the source of `log_softmax_strided`.
### BEGIN SOLUTION
LOG_SOFTMAX = (
    REDUCTIONS
    + r"""
extern "C" __global__ void log_softmax_strided(const float* x, float* y, int cols) {
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float top = NEG_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) top = fmaxf(top, xr[j]);
    top = block_max(top);
    float total = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) total += expf(xr[j] - top);
    float shift = top + logf(block_sum(total));
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = xr[j] - shift;
}
"""
)
### END SOLUTION

# %%
# Check Exercise 17.3: against log-softmax in float64 NumPy, on ordinary and on huge logits.
for scale in (1, 300):
    a = scale * rng.standard_normal((8, 200)).astype(np.float32)
    want = scipy.special.log_softmax(a.astype(np.float64), axis=-1)
    got = softmax_cuda(LOG_SOFTMAX, "log_softmax_strided", a, block=64)
    err = np.abs(got - want).max()
    print(f"logits x{scale}: smallest {got.min():.0f}, max abs difference {err:.1e}")
    assert np.isfinite(got).all(), "Exercise 17.3: -inf or NaN in the output"
    assert err < 1e-6 * max(1.0, np.abs(want).max()), f"Exercise 17.3: off by {err:.1e}"
assert nvrtc(LOG_SOFTMAX, "log_softmax.cu") != b"", "Exercise 17.3: empty cubin"

# %% [markdown]
# ## What a GPU changes
#
# The emulator says the kernels are **right**; it cannot say they are fast. What follows is
# arithmetic: on the cost of a launch measured on a GPU (`docs/cuda-kernels.md` quotes it,
# and `benchmarks/cuda_kernels_vs_torch.py` measures it on yours), and on NVIDIA's published
# limits for an H100 (compute capability 9.0).
#
# **Launches.** Python hands each kernel launch to the driver, which costs microseconds of CPU
# time per launch. The GPU runs behind, in order, while Python queues the next ones. A baby
# GPT training step makes on the order of 2,000 reference calls, each at least one launch.
# Set `launch_us` to the measured cost per launch:

# %%
calls, launch_us = 2000, 8.0  # launch_us: from docs/cuda-kernels.md, or your own GPU
print(f"launch cost alone: {calls * launch_us / 1e3:.0f} ms per training step")
B, nh, T = 16, 4, 64  # attention scores of a baby GPT: (B, nh, T, T)
nbytes = 2 * B * nh * T * T * 4  # read x once, write y once, float32
bandwidth = 3e12  # bytes/s: an H100's HBM, order of magnitude
microseconds = nbytes / bandwidth * 1e6
print(f"the softmax of its attention scores moves {nbytes / 2**20:.0f} MiB", end="")
print(f" in {microseconds:.1f} µs at {bandwidth / 1e12:.0f} TB/s: less than one launch costs")

# %% [markdown]
# So at baby sizes the GPU waits for Python: the step is **launch-bound**. What helps is fewer
# launches (fused kernels that do in one launch what the reference does in several; CUDA
# graphs, which replay a recorded sequence of launches at once), not faster kernels.
#
# **Syncs.** `loss.item()`, `float(x)`, `.get()`, `bool(x > 0)`, or a Python `if` on a device
# value make Python wait until the GPU has drained its queue (and each sync costs a round trip
# of its own besides). Then the GPU idles while Python queues the next launches: the overlap
# that hid the launch cost is gone. A training step should contain no sync; print the loss
# every N steps.
#
# **Occupancy.** An SM hides the latency of memory (hundreds of cycles) by switching between
# many resident warps. How many blocks fit at once is set by three budgets: threads, registers
# and shared memory per SM.

# %%
# Per-SM limits of compute capability 9.0 (H100, H200), from NVIDIA's CUDA programming guide.
SM = {"threads": 2048, "blocks": 32, "registers": 65536, "shared_bytes": 228 * 1024}


def blocks_per_sm(threads: int, registers_per_thread: int, shared_bytes: int) -> int:
    """Resident blocks per SM (ignoring allocation granularity): the tightest budget wins."""
    return min(
        SM["blocks"],
        SM["threads"] // threads,
        SM["registers"] // (threads * registers_per_thread),
        SM["shared_bytes"] // max(1, shared_bytes),
    )


for threads, regs in [(256, 32), (256, 64), (256, 128), (1024, 32), (32, 32)]:
    n = blocks_per_sm(threads, regs, shared_bytes=2 * 32 * 4)  # our two partial[32] arrays
    resident = f"{n * threads:4d} of 2048 threads resident ({n * threads / 2048:.0%} occupancy)"
    print(f"blocks of {threads:4d} threads, {regs:3d} registers each: {n:2d} per SM, {resident}")

# %% [markdown]
# Blocks of 256 threads: 2048 / 256 = 8 blocks fill an SM, if each thread uses at most 32
# registers; at 64 registers the register file allows only 4 (50% occupancy). Blocks of one
# warp hit the limit of 32 blocks at half the threads.
#
# How many registers does our kernel use? The compiler decides, and says so when asked:
# NVRTC passes `-Xptxas=-v` to its assembler, which writes each kernel's registers and shared
# memory into the compile log, which `_nvrtc.compile_with_log` hands back (CuPy makes the
# same NVRTC calls when it compiles):


# %%
def ptxas_report(source: str, arch: str = "sm_90") -> dict[str, str]:
    """{kernel: "Used N registers, ... smem"} from NVRTC's verbose compile of `source`."""
    options = ("-std=c++17", "-Xptxas=-v")
    _, log = _nvrtc.compile_with_log(source, "report.cu", arch, options)
    return dict(re.findall(r"entry function '(\w+)'.*?ptxas info\s*: (Used [^\n]*)", log, re.S))


try:
    for kernel, usage in {
        **ptxas_report(SOFTMAX_STRIDED),
        **ptxas_report(_runtime.source("softmax")),
    }.items():
        regs = int(re.search(r"(\d+) registers", usage).group(1))
        print(f"{kernel:21s} {usage} -> {blocks_per_sm(256, regs, 512)} blocks of 256 per SM")
except (_nvrtc.NvrtcUnavailable, OSError) as error:
    print("NVRTC is not available here:", error)

# %% [markdown]
# Fewer than 32 registers and a few hundred bytes of shared memory: softmax is limited by
# neither, only by the 2048 threads. Occupancy becomes the question for kernels that keep
# tiles in registers and shared memory (a matrix product), where it trades against reuse.
#
# **Coalescing.** A warp's load instruction is served in 32-byte sectors. If its 32 threads
# read 32 consecutive floats (128 bytes), that is 4 sectors, all used. In version 1 the threads
# of a warp read elements a row apart (400 bytes for 100 columns): 32 sectors of which 4 bytes
# each are used, 1/8 of the bandwidth, unless a cache catches the rest on the next
# iterations. One block per row with a stride loop is coalesced at every step.
#
# **A block per row, or a warp per row?** A block of 256 threads on a row of a few hundred to a
# few thousand columns gives each thread 1-16 elements and uses the whole block; the price,
# two barriers and a trip through shared memory per reduction, is small next to the row.
# On a row of 64 columns (attention with T = 64) the same block leaves 192 threads idle, and
# the barriers cost as much as the work: there one **warp** per row is better (2 elements
# per lane, 5 shuffles per reduction, no shared memory, no `__syncthreads`), with several rows
# per block so that blocks stay large. tinyformer's wrapper goes halfway: blocks of 32 threads
# for short rows. Rows of hundreds of thousands of columns want the opposite: several blocks
# per row.
#
# **Question:** the emulator ran every kernel here, and agreed with NumPy. Name three things it
# cannot tell you about the same kernel on a GPU.
# <!-- ANSWER: its speed (launch cost, occupancy, coalescing, warp divergence are not modelled:
# threads take turns, blocks one after another); the real outcome of a data race (a missing
# __syncthreads reads a value not yet written on the emulator, every run; on a GPU the result is
# undefined, and can be right on one GPU and wrong on the next); resource limits (registers, 48 KB
# static shared memory per block, 1024 threads per block are not enforced), and float details of the
# GPU's expf (fast-math intrinsics differ from glibc in the last bits). -->
#
# **Question:** version 1 starts 64 threads for 64 rows; version 2 starts 64 x 128. On an
# H100 SXM (132 SMs, 2048 resident threads each), what fraction of the GPU does each use?
# <!-- ANSWER: 64 threads is two warps: at most 2 SMs busy, a fraction of one percent of the
# 270,336 thread slots. 8,192 threads as 64 blocks: 64 of 132 SMs get one block each (about 3%
# of the thread slots): still far from full; a real model has many more rows (B * nh * T). -->
#
# ## What next
#
# - `kernels/cuda/softmax.cu` also has the backward (the row's formula of assignment A2.1): one
#   more `block_sum`. Read it; layer norm is the same pattern with two `block_sum`s per row.
# - `python -m pytest -q tests/test_ops_generic.py -k "softmax and cuda"` checks tinyformer's
#   kernel against the reference on random shapes, on the emulator.
