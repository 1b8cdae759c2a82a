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
# # Assignment A6: distributed training — a ring all-reduce, gradient buckets, a pipeline
#
# You write the three plans that tinyformer's distributed training follows, in
# `tinyformer/distributed/schedules.py`:
#
# | task | function | what it decides |
# |---|---|---|
# | A6.1 | `ring_all_reduce(xs, send)` | which chunk each rank sends at each step of a ring |
# | A6.2 | `assign_buckets(nbytes, cap)` | which gradients DDP averages in one call |
# | A6.3 | `gpipe_schedule(stages, micro_batches)` | what each pipeline stage does at each tick |
#
# They are the real thing: `DistributedDataParallel` builds its buckets with your
# `assign_buckets`, and `pipeline.Stage.step` runs your GPipe table, over MPI, when you train
# on several processes (`tinyformer launch -n 2 -- train gpt`, with `pip install -e ".[mpi]"`).
# Each function raises `NotImplementedError` until you replace that line; its docstring says
# exactly what to return, and `docs/distributed.md` explains why. After editing the file,
# restart the kernel (or `importlib.reload(schedules)`).
#
# Grade yourself at any time from the root of this folder:
#
#     tinyformer grade A6 .

# %%
import numpy as np

from tinyformer.course import workspace
from tinyformer.distributed import schedules
from tinyformer.models.gpt import GPT, GPTConfig

# Stops here, loudly, if `import tinyformer` loads another folder than the one this notebook
# is in (say, another release that you installed later).
workspace.check()
rng = np.random.default_rng(0)

# %% [markdown]
# ## A6.1 The ring all-reduce
#
# Four ranks each hold an array; after the all-reduce each holds their sum. Every rank sends
# 2 (N - 1) chunks of 1/N of the array, whatever N is: the reason a ring scales.
#
# Every message goes through `send(src, dst, chunk)`, which returns what rank `dst` receives
# (by default a copy): a rank learns another rank's values only from what `send` delivers. The
# grader passes its own `send` and counts the bytes and messages from what it carries, and
# checks each message against the ring's, so the count you return must be the truth.
#
# **Exercise.** Check your `ring_all_reduce` on 4 ranks, then print how many bytes rank 0 sends
# for a 1 MB array on 2, 4, 8 and 64 ranks, and what sending it to one rank and back would cost
# that rank instead.

# %%
xs = [rng.standard_normal(8) for _ in range(4)]
outs, sent = schedules.ring_all_reduce(xs)
assert all(np.allclose(o, np.sum(xs, axis=0)) for o in outs), "a rank does not hold the sum"
assert sent == 2 * 3 * 16, f"rank 0 sent {sent} bytes; 2 (N - 1) chunks of 16 bytes is 96"
# ring_bytes[n]: what rank 0 sends for 1 MB (125,000 float64) on n ranks
### BEGIN SOLUTION
ring_bytes = {}
for n in (2, 4, 8, 64):
    _, ring_bytes[n] = schedules.ring_all_reduce([np.zeros(125_000 // n * n) for _ in range(n)])
    central = 2 * (n - 1)  # MB: n - 1 arrays in, n - 1 out
    print(f"{n:3d} ranks: rank 0 sends {ring_bytes[n] / 1e6:.2f} MB (a central rank: {central} MB)")
### END SOLUTION
assert ring_bytes[4] == 2 * 3 * 250_000 and ring_bytes[64] < 2e6, "the ring stays under 2 MB"

# %% [markdown]
# ## A6.2 Gradient buckets
#
# **Exercise.** Bucket the parameters of a small GPT with a cap of 32 KiB and print each
# bucket's parameter names and bytes. Which bucket's all-reduce can start first in backward?

# %%
model = GPT(GPTConfig(block_size=16, vocab_size=11, n_layer=2, n_head=2, n_embd=32))
# buckets: the lists of parameter indices, from schedules.assign_buckets
names, sizes = zip(*[(n, p.data.nbytes) for n, p in model.named_parameters()])
### BEGIN SOLUTION
buckets = schedules.assign_buckets(list(sizes), 32 * 1024)
for b, members in enumerate(buckets):
    print(b, sum(sizes[i] for i in members), [names[i] for i in members])
### END SOLUTION
assert sorted(i for b in buckets for i in b) == list(range(len(sizes))), "each parameter once"
assert all(sum(sizes[i] for i in b) <= 32 * 1024 or len(b) == 1 for b in buckets), "the cap"

# %% [markdown]
# ## A6.3 GPipe's schedule
#
# **Exercise.** Print the table for 3 stages and 4 micro-batches, one row per tick (`F2` for
# the forward of micro-batch 2, `B2` for its backward, `.` for a wait), and check that the
# share of waits is (S - 1) / (M + S - 1).

# %%
# table: schedules.gpipe_schedule(3, 4), printed
### BEGIN SOLUTION
table = schedules.gpipe_schedule(3, 4)
for t, row in enumerate(table):
    print(f"{t:2d}  " + "  ".join("." if c is None else f"{c[0][0].upper()}{c[1]}" for c in row))
### END SOLUTION
assert schedules.bubble_fraction(table) == 2 / 6, "the bubble of 3 stages and 4 micro-batches"
print(f"bubble: {schedules.bubble_fraction(table):.0%} of the stage-ticks")
