"""Tasks handed out while a parallel loop runs, not split up front (no kernels here).

Why: Numba's `prange` splits its range evenly and up front, so the loop ends when the slowest
worker ends. That is right when every core runs at the same speed. It is wrong on a laptop
whose efficiency cores run at about half the speed of its performance cores, and on a shared
virtual machine, whose cores slow down and speed up with their neighbours' load. On the 2-vCPU
machine this project is benchmarked on, cycle counters read inside the attention backward's two
workers showed one worker often taking 1.5-1.6x as long as the other over the same share of
(batch, head) pairs, for seconds at a time, either worker.

So a compute-heavy kernel starts one loop iteration per worker, and each worker claims task
after task from a shared counter until none is left: a fast worker claims more.

    tasks = new_counter()
    for w in prange(workers):
        ...                          # per-worker scratch, allocated once
        t = claim(tasks)
        while t < n_tasks:
            ...                      # task t
            t = claim(tasks)

`claim` is an atomic fetch-and-add on the counter (one LLVM `atomicrmw` instruction: Numba has
no atomics on the CPU). Its ordering is "monotonic": it only has to hand each number out once;
what the tasks write is published by the barrier at the end of the parallel loop. A claim costs
tens of nanoseconds, so tasks should take microseconds.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable


@register_jitable
def new_counter():
    """A task counter at 0 (an int64 array of one element, shared by the workers)."""
    return np.zeros(1, np.int64)


def claim(counter):
    """The next task's number: counter[0], then counter[0] += 1, as one atomic step. (Pure-Python
    stand-in, for NUMBA_DISABLE_JIT=1, where `prange` is `range` and nothing runs concurrently;
    inside Numba kernels the overload below runs.)"""
    task = int(counter[0])
    counter[0] += 1
    return task


@intrinsic
def _fetch_add_one(typingctx, counter):
    """counter[0] += 1 atomically; returns the value before."""
    sig = types.int64(counter)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        one = ir.Constant(ir.IntType(64), 1)
        return builder.atomic_rmw("add", array.data, one, "monotonic")

    return sig, codegen


@overload(claim, inline="always")
def _claim_overload(counter):
    if isinstance(counter, types.Array) and counter.dtype == types.int64 and counter.ndim == 1:
        return lambda counter: _fetch_add_one(counter)
    return None
