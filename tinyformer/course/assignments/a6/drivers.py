"""A6's functions driven by plain data: what the grader's child runs for its tests.

The schedules return lists and tuples, which do not cross the grader's pipe: these wrappers
call the student's functions in the child and encode what they return as arrays, which the
grader judges (`checks.py`, beside this file). They are no part of the assignment and hold no
answer.
"""

from __future__ import annotations

import numpy as np

from tinyformer.distributed import schedules

__all__ = ["buckets", "gpipe", "ring"]


def ring(xs: np.ndarray) -> tuple[np.ndarray, ...]:
    """ring_all_reduce on the rows of xs (N ranks, L), every message sent through a recording
    transport -> (every rank's result (N, L), the bytes rank 0 says it sent, each message's
    source, destination and byte count, and the messages' values, concatenated). The grader
    counts the traffic from the messages and checks each one against the ring's."""
    src, dst, nbytes, values = [], [], [], []

    def send(s: int, d: int, data: np.ndarray) -> np.ndarray:
        data = np.asarray(data)
        src.append(int(s))
        dst.append(int(d))
        nbytes.append(int(data.nbytes))
        values.append(np.asarray(data, dtype=np.float64).ravel())
        return np.array(data, copy=True)

    outs, sent = schedules.ring_all_reduce(list(xs), send)
    outs = np.stack([np.asarray(o, dtype=np.float64) for o in outs])
    flat = np.concatenate(values) if values else np.zeros(0)
    return outs, np.asarray(sent), np.asarray(src), np.asarray(dst), np.asarray(nbytes), flat


def buckets(nbytes: np.ndarray, cap: int) -> np.ndarray:
    """assign_buckets -> each parameter's bucket number, and -1 for one in no bucket; a
    parameter in two buckets gets -2."""
    out = np.full(len(nbytes), -1)
    for b, members in enumerate(schedules.assign_buckets([int(n) for n in nbytes], int(cap))):
        for i in members:
            out[int(i)] = b if out[int(i)] == -1 else -2
    return out


def gpipe(stages: int, micro_batches: int) -> np.ndarray:
    """gpipe_schedule as an int array (ticks, stages): -1 waits, m a forward of micro-batch m,
    M + m its backward (M = micro_batches)."""
    table = schedules.gpipe_schedule(int(stages), int(micro_batches))
    out = np.full((len(table), int(stages)), -1)
    for t, row in enumerate(table):
        for s, cell in enumerate(row):
            if cell is not None:
                phase, m = cell
                out[t, s] = int(m) + (micro_batches if phase == "backward" else 0)
    return out
