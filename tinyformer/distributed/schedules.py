"""The plans behind the collectives and the pipeline, as small pure functions that the real
code follows: which chunk each rank sends at each step of a ring all-reduce, which parameters
share a DistributedDataParallel bucket, and what each pipeline stage does at each clock tick.
Being plain functions of numbers, they can be read, tested and drawn without any MPI."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "assign_buckets", "bubble_fraction", "gpipe_schedule", "ring_all_reduce", "stage_order",
]  # fmt: skip


def _deliver(src: int, dst: int, data: np.ndarray) -> np.ndarray:
    """The default transport of `ring_all_reduce`: what rank dst receives is a copy."""
    return np.array(data, copy=True)


def ring_all_reduce(
    xs: list[np.ndarray], send: Callable[[int, int, np.ndarray], np.ndarray] = _deliver
) -> tuple[list[np.ndarray], int]:
    """Simulate a ring all-reduce over len(xs) ranks, rank r holding xs[r] (all one shape).

    Each array is cut into N chunks and rank r sends to rank r + 1 (mod N). Reduce-scatter, N - 1
    steps: at step s rank r sends chunk (r - s) mod N, which its neighbour adds to its own; rank
    r then holds the whole sum of chunk (r + 1) mod N. All-gather, N - 1 steps: at step s rank r
    sends chunk (r + 1 - s) mod N, which its neighbour copies. In each step every rank sends
    first, then every rank receives (they send at the same time).

    Every message goes through `send(src, dst, chunk)`, which returns what rank dst receives:
    the transport (a copy by default; a communicator that counts the traffic when graded). A
    rank only ever learns another rank's values from what `send` delivers.

    Returns every rank's final array (each the sum of xs) and the bytes rank 0 sent:
    2 (N - 1) / N times the array's bytes (for N dividing its size).
    """
    ### BEGIN SOLUTION A6.1 ring all-reduce
    n = len(xs)
    chunks = [np.array_split(np.array(a, dtype=np.float64), n) for a in xs]
    sent = 0
    for step in range(n - 1):  # reduce-scatter
        messages = [(r, (r - step) % n, chunks[r][(r - step) % n]) for r in range(n)]
        received = [(r, c, send(r, (r + 1) % n, data)) for r, c, data in messages]
        for r, c, data in received:
            chunks[(r + 1) % n][c] = chunks[(r + 1) % n][c] + data
        sent += messages[0][2].nbytes
    for step in range(n - 1):  # all-gather
        messages = [(r, (r + 1 - step) % n, chunks[r][(r + 1 - step) % n]) for r in range(n)]
        received = [(r, c, send(r, (r + 1) % n, data)) for r, c, data in messages]
        for r, c, data in received:
            chunks[(r + 1) % n][c] = np.array(data, dtype=np.float64)
        sent += messages[0][2].nbytes
    return [np.concatenate(c) for c in chunks], sent
    ### END SOLUTION


def assign_buckets(nbytes: list[int], cap: int) -> list[list[int]]:
    """Group parameters into DistributedDataParallel's buckets.

    `nbytes[i]` is parameter i's size, in registration order. Backward produces the last
    parameters' gradients first, so buckets are filled from the last parameter backwards: a
    parameter joins the current bucket unless that would take the bucket past `cap` bytes, in
    which case it starts a new one (a parameter larger than `cap` gets a bucket of its own).
    Returns the buckets, in the order they fill, each a list of parameter indices in that order.
    """
    ### BEGIN SOLUTION A6.2 buckets
    buckets: list[list[int]] = []
    size = 0
    for i in reversed(range(len(nbytes))):
        if not buckets or size + nbytes[i] > cap:
            buckets.append([])
            size = 0
        buckets[-1].append(i)
        size += nbytes[i]
    return buckets
    ### END SOLUTION


def gpipe_schedule(stages: int, micro_batches: int) -> list[list[tuple[str, int] | None]]:
    """GPipe's schedule as a table: `table[t][s]` is what stage s does at clock tick t, a
    ("forward" | "backward", micro-batch) pair, or None while it waits (the bubble).

    Every piece takes one tick, and a stage does one piece per tick. Forward: micro-batches
    enter stage 0 in order, one per tick, and each moves on to the next stage at the next tick.
    Backward starts at the tick after the last stage's last forward: micro-batches in reverse
    order, from the last stage down, each moving to the previous stage at the next tick. The
    table has 2 (M + S - 1) ticks, M micro-batches and S stages.
    """
    ### BEGIN SOLUTION A6.3 GPipe schedule
    s_, m_ = stages, micro_batches
    table: list[list[tuple[str, int] | None]] = [[None] * s_ for _ in range(2 * (m_ + s_ - 1))]
    for s in range(s_):
        for m in range(m_):
            table[s + m][s] = ("forward", m)
            table[(m_ + s_ - 1) + (s_ - 1 - s) + (m_ - 1 - m)][s] = ("backward", m)
    return table
    ### END SOLUTION


def stage_order(table: list[list[tuple[str, int] | None]], stage: int) -> list[tuple[str, int]]:
    """What stage `stage` does, in order: its column of the schedule without the waits."""
    return [row[stage] for row in table if row[stage] is not None]


def bubble_fraction(table: list[list[tuple[str, int] | None]]) -> float:
    """The share of stage-ticks spent waiting: (S - 1) / (M + S - 1) for GPipe."""
    cells = [cell for row in table for cell in row]
    return sum(cell is None for cell in cells) / len(cells)
