"""Where a parallel Numba kernel runs faster on one thread than on the pool (registry.py,
"Threads"). Written by `python -m benchmarks.one_thread`; measured, not chosen: rerun it
on another machine rather than edit the numbers.

ONE_THREAD_BELOW: primitive -> work (elements of its first array) below which one
thread wins.
"""

MEASURED = "2026-12-07, AMD EPYC, 2 CPUs, load average 15.7 to 12.0"
ONE_THREAD_BELOW: dict[str, int] = {
    "adamw.step": 213121,
    "adamw.step_many": 213121,
    "attention.backward": 98304,
    "attention.forward": 196608,
    "cross_entropy.backward": 1537,
    "cross_entropy.forward": 6912,
    "dropout.backward": 393216,
    "dropout.forward": 4096,
    "gelu.backward": 32768,
    "gelu.forward": 32768,
    "layer_norm.backward": 196609,
    "layer_norm.forward": 196609,
    "linear.backward": 32768,
    "linear.forward": 196609,
    "log_softmax.backward": 99841,
    "log_softmax.forward": 6912,
    "softmax.backward": 393217,
    "softmax.forward": 16384,
}
