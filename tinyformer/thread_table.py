"""Where a parallel Numba kernel runs faster on one thread than on the pool (registry.py,
"Threads"). Written by `python -m benchmarks.one_thread`; measured, not chosen: rerun it
on another machine rather than edit the numbers.

ONE_THREAD_BELOW: primitive -> work (elements of its first array) below which one
thread wins.
"""

MEASURED = "not yet measured"
ONE_THREAD_BELOW: dict[str, int] = {}
