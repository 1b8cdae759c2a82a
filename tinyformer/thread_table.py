"""Where a parallel Numba kernel runs faster on one thread than on the pool (registry.py,
"Threads"). Written by `python -m benchmarks.one_thread`; measured, not chosen: rerun it
on another machine rather than edit the numbers.

ONE_THREAD_BELOW: primitive -> work (elements of its first array) below which one
thread wins.
"""

MEASURED = "2026-12-07, AMD EPYC, 2 CPUs, load average 2.0 to 2.1"
ONE_THREAD_BELOW: dict[str, int] = {
    "adamw.step": 213121,
    "adamw.step_many": 213121,
    "attention.backward": 98304,
    "attention.forward": 98304,
    "cross_entropy.backward": 768,
    "cross_entropy.forward": 33280,
    "dropout.backward": 786433,
    "dropout.forward": 32768,
    "gelu.backward": 65536,
    "gelu.forward": 32768,
    "layer_norm.backward": 196609,
    "layer_norm.forward": 98304,
    "linear.backward": 65536,
    "linear.forward": 16384,
    "log_softmax.backward": 49920,
    "log_softmax.forward": 33280,
    "softmax.backward": 393216,
    "softmax.forward": 32768,
}
