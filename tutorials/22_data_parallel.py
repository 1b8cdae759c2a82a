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
# # 22. Training on several processes: all-reduce, DDP, ZeRO and a pipeline
#
# Every model so far trained in one process. Large models train on many: each process (a
# **rank**) holds the model and a shard of the batch, and the ranks average their gradients
# before every step. This notebook builds the pieces from the bottom:
#
# 1. why averaging the gradients of shards equals the gradient of the whole batch;
# 2. the **ring all-reduce**, written from sends and receives, and its traffic;
# 3. DistributedDataParallel's **buckets**, and why they let communication overlap backward;
# 4. **ZeRO**'s memory arithmetic;
# 5. a **pipeline** of two stages, and its bubble drawn from real timings.
#
# The real thing runs under MPI (`pip install -e ".[mpi]"`, then `tinyformer launch -n 2 --
# train gpt`); here the ranks are simulated in one process, and two real ranks are started with
# `mpiexec` where it is installed.

# %%
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import tinyformer as tf
from tinyformer.distributed.ddp import DistributedDataParallel
from tinyformer.models.gpt import GPT, GPTConfig

SMALL = bool(os.environ.get("TINYFORMER_SMALL"))
CONFIG = GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16)
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Shards of a batch, and the mean of their gradients
#
# The loss of a batch of B examples is the mean of the examples' losses. Split the batch into
# N shards of B/N: the batch's mean is the mean of the shards' means, and since the gradient
# is linear, the batch's gradient is the mean of the shards' gradients. Two copies of one GPT,
# each given half of the batch, show it.

# %%
x = rng.integers(0, CONFIG.vocab_size, (8, CONFIG.block_size))
y = rng.integers(0, CONFIG.vocab_size, (8, CONFIG.block_size))


def gradients(model, xs, ys):
    model.zero_grad()
    model(xs, ys)[1].backward()
    return {name: p.grad.copy() for name, p in model.named_parameters()}


tf.manual_seed(0)
model = GPT(CONFIG).to(dtype="float64")
whole = gradients(model, x, y)
halves = [gradients(model, x[i : i + 4], y[i : i + 4]) for i in (0, 4)]
worst = max(np.abs((halves[0][n] + halves[1][n]) / 2 - whole[n]).max() for n in whole)
print(f"largest difference between the mean of the halves' gradients and the whole: {worst:.1e}")

# %% [markdown]
# ## 2. The ring all-reduce
#
# Sending every gradient to one rank and back costs that rank N times the model's bytes. The
# ring does better. Cut each rank's array into N chunks; arrange the ranks in a ring, rank r
# sending to rank r + 1:
#
# - **reduce-scatter**, N - 1 steps: at step s, rank r sends chunk (r - s) mod N to its
#   neighbour, which adds it to its own. After N - 1 steps rank r holds the full sum of chunk
#   (r + 1) mod N.
# - **all-gather**, N - 1 steps: the summed chunks travel once more around the ring, each rank
#   copying what it receives.
#
# Every rank sends 2 (N - 1) chunks of 1/N of the array: 2 (N - 1) / N times its size, which
# stays under twice the size however many ranks there are.
#
# **Exercise 22.1** — write `ring_all_reduce(xs)`: `xs` holds one array per rank (all of one
# shape); return the list of what each rank holds at the end (each the sum of all `xs`) and
# the bytes that rank 0 sent. Simulate a step by first collecting every rank's message, then
# delivering them all (the ranks send at the same time).


# %%
# Exercise 22.1: ring_all_reduce(xs) -> (list of per-rank sums, bytes rank 0 sent)
### BEGIN SOLUTION A6.1 ring all-reduce, in the tutorial
def ring_all_reduce(xs):
    n = len(xs)
    chunks = [np.array_split(np.array(a, dtype=float), n) for a in xs]
    sent = 0
    for step in range(n - 1):  # reduce-scatter
        messages = [(r, (r - step) % n, chunks[r][(r - step) % n].copy()) for r in range(n)]
        for r, c, data in messages:
            chunks[(r + 1) % n][c] += data
            sent += data.nbytes if r == 0 else 0
    for s in range(n - 1):  # all-gather
        messages = [(r, (r + 1 - s) % n, chunks[r][(r + 1 - s) % n].copy()) for r in range(n)]
        for r, c, data in messages:
            chunks[(r + 1) % n][c] = data
            sent += data.nbytes if r == 0 else 0
    return [np.concatenate(c) for c in chunks], sent


### END SOLUTION

# %%
# Check Exercise 22.1: every rank ends with the sum, and rank 0 sends 2 (N - 1) / N of the array.
for n in (2, 3, 4):
    xs = [rng.standard_normal(12) for _ in range(n)]
    out, sent = ring_all_reduce(xs)
    for held in out:
        assert np.allclose(held, sum(xs)), f"Exercise 22.1: with {n} ranks a rank holds no sum"
    assert sent == 2 * (n - 1) * xs[0].nbytes // n, f"Exercise 22.1: {n} ranks sent {sent} bytes"
    print(f"{n} ranks: rank 0 sent {sent} bytes for an array of {xs[0].nbytes}")

# %% [markdown]
# ## 3. Buckets: communication while backward runs
#
# Backward produces gradients from the last layer to the first. DistributedDataParallel puts
# the parameters into **buckets** of about `bucket_cap_mb`, in reverse order, and starts a
# bucket's all-reduce the moment its last gradient arrives, while backward goes on with the
# earlier layers. One all-reduce per bucket instead of per parameter saves the fixed cost of
# each call; small buckets start sooner. Here are the buckets of the GPT above:

# %%
buckets = DistributedDataParallel._make_buckets(list(model.parameters()), cap=8 * 1024)
names = {id(p): n for n, p in model.named_parameters()}
for i, bucket in enumerate(buckets):
    size = sum(p.data.nbytes for p in bucket.params)
    print(f"bucket {i}: {size:6d} bytes, {[names[id(p)] for p in bucket.params][:3]} ...")

# %% [markdown]
# ## 4. ZeRO: the optimizer's state, sharded
#
# AdamW keeps two moments per parameter element. With N ranks each holding everything, a model
# of P float32 parameters costs every rank 4P bytes of weights, 4P of gradients and 8P of
# moments. ZeRO stage 1 gives each rank the moments of 1/N of the parameters; stage 2 also
# shards the gradients, stage 3 the weights.
#
# **Exercise 22.2** — write `zero_bytes(p, n, stage)`: the bytes per rank for P float32
# parameters on N ranks, for stage 0 (plain data parallel) to 3.


# %%
# Exercise 22.2: zero_bytes(p, n, stage) -> bytes per rank
### BEGIN SOLUTION
def zero_bytes(p, n, stage):
    weights, grads, moments = 4 * p, 4 * p, 8 * p
    if stage >= 1:
        moments /= n
    if stage >= 2:
        grads /= n
    if stage >= 3:
        weights /= n
    return weights + grads + moments


### END SOLUTION

# %%
# Check Exercise 22.2, then the table for the GPT-2 configuration.
assert zero_bytes(10, 2, 0) == 160 and zero_bytes(10, 2, 1) == 120, "Exercise 22.2: stage 0/1"
assert zero_bytes(10, 2, 3) == 80, "Exercise 22.2: stage 3 shards everything"
p = GPTConfig(block_size=1024, vocab_size=50257, n_layer=12, n_head=12, n_embd=768).num_parameters()
print(f"GPT-2 small: {p / 1e6:.0f}M parameters; GiB per rank")
print("ranks | stage 0 | stage 1 | stage 2 | stage 3")
for n in (1, 2, 8, 64):
    print(f"{n:5d} | " + " | ".join(f"{zero_bytes(p, n, s) / 2**30:7.2f}" for s in range(4)))

# %% [markdown]
# ## 5. Two real ranks: DDP equals one process, and a pipeline's bubble
#
# Where MPI is installed, this starts two ranks with `mpiexec`. The first job trains the GPT
# data parallel for three AdamW steps, each rank on half of every batch, and saves rank 0's
# weights; one process here trains on the whole batches and compares. The second job runs the
# GPT as a pipeline of two stages (`tinyformer.distributed.pipeline.Stage`): GPipe's schedule,
# every micro-batch forward, then every micro-batch backward, and each rank records when it
# worked. The gaps are the **bubble**, a fraction (N - 1) / (M + N - 1) of the step.

# %%
JOB = """
import json, sys
import numpy as np
import tinyformer as tf
import tinyformer.distributed as dist
from tinyformer.distributed.pipeline import Stage
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.optim import AdamW

out, micro = sys.argv[1], int(sys.argv[2])
dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
config = GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=16)
rng = np.random.default_rng(1)
batches = [rng.integers(0, 11, (2, 8, 16)) for _ in range(3)]
tf.manual_seed(0)
model = dist.DistributedDataParallel(GPT(config).to(dtype="float64"))
opt = AdamW(model.module.parameters(), lr=1e-2)
for x, y in batches:
    opt.zero_grad()
    n = len(x) // world  # this rank's shard of the batch
    model(x[rank * n : (rank + 1) * n], y[rank * n : (rank + 1) * n])[1].backward()
    opt.step()
if rank == 0:
    np.savez(out + "/ddp.npz", **{n: p.numpy() for n, p in model.module.named_parameters()})
tf.manual_seed(0)
stage = Stage.from_gpt(GPT(config).to(dtype="float64"))
x, y = rng.integers(0, 11, (2, 4 * micro, 16))
stage.step(x, y, micro_batches=micro)
stage.step(x, y, micro_batches=micro)  # the second step: warm
t0 = stage.timeline[0][2]
with open(f"{out}/timeline{rank}.json", "w") as f:
    json.dump([(ph, i, a - t0, b - t0) for ph, i, a, b in stage.timeline], f)
"""


def mpiexec():
    try:
        from tinyformer.distributed.launch import find_mpiexec

        return find_mpiexec()
    except Exception as err:  # no mpi extra installed: say so and skip the real ranks
        print(f"MPI is not available ({err}); skipping the two real ranks")
        return None


timelines = None
with tempfile.TemporaryDirectory() as tmp:
    launcher = mpiexec()
    if launcher:
        Path(tmp, "job.py").write_text(JOB)
        env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
        cmd = [launcher, "-n", "2", sys.executable, f"{tmp}/job.py", tmp, "4"]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        ranks = dict(np.load(f"{tmp}/ddp.npz"))
        timelines = [json.loads(Path(tmp, f"timeline{r}.json").read_text()) for r in (0, 1)]

if timelines is not None:
    rng1 = np.random.default_rng(1)
    batches = [rng1.integers(0, 11, (2, 8, 16)) for _ in range(3)]
    tf.manual_seed(0)
    single = GPT(CONFIG).to(dtype="float64")
    opt = tf.optim.AdamW(single.parameters(), lr=1e-2)
    for xb, yb in batches:
        opt.zero_grad()
        single(xb, yb)[1].backward()
        opt.step()
    diff = max(np.abs(p.numpy() - ranks[n]).max() for n, p in single.named_parameters())
    print(f"2 ranks with half batches vs one process: largest weight difference {diff:.1e}")

# %%
if timelines is not None:
    fig, ax = plt.subplots(figsize=(8, 2.2))
    for rank, timeline in enumerate(timelines):
        for phase, i, start, end in timeline:
            color = "tab:blue" if phase == "forward" else "tab:orange"
            ax.barh(rank, (end - start) * 1e3, left=start * 1e3, color=color, edgecolor="k")
            ax.text((start + end) / 2 * 1e3, rank, str(i), ha="center", va="center", fontsize=8)
    ax.set_yticks([0, 1], ["stage 0", "stage 1"])
    ax.invert_yaxis()
    ax.set_xlabel("ms (blue: forward, orange: backward; the numbers are micro-batches)")
    ax.set_title("GPipe on 2 ranks, 4 micro-batches: the white gaps are the bubble")
    plt.show()

# %% [markdown]
# **Question:** Why does stage 1 start its first forward late, and stage 0 finish its last
# backward late? With N = 2 stages, how many micro-batches make the bubble under 10% of the
# step? What does a micro-batch cost in memory while it waits for its backward?
