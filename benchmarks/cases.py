"""What the harness measures.

- Engine overhead: a chain of elementwise ops on a one-element tensor, forward + backward, per
  op; the same chain in plain NumPy is subtracted, leaving tinyformer's bookkeeping (building
  the graph, the topological sort, accumulating gradients, the checks). The same chain under
  `no_grad` (forward only), and in PyTorch when it is installed (same process, same run).
- Ops at the "baby GPT" training shapes (batch 12, context 64, width 128, 4 heads, vocabulary
  65): forward and backward of each op through autograd, as a training step runs them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer.bench import median_time

BABY = {"B": 12, "T": 64, "C": 128, "nh": 4, "V": 65}


def engine_overhead(n_ops: int = 10_000, repeats: int = 5) -> dict[str, Any]:
    x = tf.Tensor(np.ones(1, np.float32), requires_grad=True)

    def forward():
        y = x
        for _ in range(n_ops):
            y = y * 1.0001
        return y

    def forward_backward():
        x.grad = None
        forward().backward()

    def numpy_only():  # the arithmetic alone, forward and backward
        y, g = x.data, np.ones(1, np.float32)
        for _ in range(n_ops):
            y = y * np.float32(1.0001)
        for _ in range(n_ops):
            g = g * np.float32(1.0001)

    def forward_no_grad():
        with tf.no_grad():
            forward()

    t_forward = median_time(forward, repeats, warmup=1)
    t_total = median_time(forward_backward, repeats, warmup=1)
    t_numpy = median_time(numpy_only, repeats, warmup=1)
    t_no_grad = median_time(forward_no_grad, repeats, warmup=1)
    us = 1e6 / n_ops
    result = {
        "ops": n_ops,
        "forward_us_per_op": t_forward * us,
        "backward_us_per_op": (t_total - t_forward) * us,
        "total_us_per_op": t_total * us,
        "numpy_us_per_op": t_numpy * us,
        "bookkeeping_us_per_op": (t_total - t_numpy) * us,
        "no_grad_forward_us_per_op": t_no_grad * us,
    }
    if importlib.util.find_spec("torch") is not None:  # the same chain, same process
        result["torch_total_us_per_op"] = _torch_chain(n_ops, repeats) * us
    return result


def _torch_chain(n_ops: int, repeats: int) -> float:
    """Seconds for the engine-overhead chain, forward + backward, in PyTorch: all of it is
    PyTorch's bookkeeping (its arithmetic on one element is a few nanoseconds)."""
    import torch

    x = torch.ones(1, requires_grad=True)

    def forward_backward():
        x.grad = None
        y = x
        for _ in range(n_ops):
            y = y * 1.0001
        y.backward()

    return median_time(forward_backward, repeats, warmup=1)


def _op_cases(s: dict[str, int]) -> list[tuple[str, str, Callable[[], tf.Tensor], list]]:
    """(name, shape, forward thunk, leaves) for each op."""
    rng = np.random.default_rng(0)
    B, T, C, nh, V = s["B"], s["T"], s["C"], s["nh"], s["V"]

    def leaf(*shape):
        return tf.Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)

    x, x4 = leaf(B * T, C), leaf(B * T, 4 * C)
    w, b = leaf(4 * C, C), leaf(4 * C)
    scores = leaf(B, nh, T, T)
    logits = leaf(B * T, V)
    target = rng.integers(0, V, B * T)
    table = leaf(V, C)
    idx = rng.integers(0, V, (B, T))
    q, k, v = leaf(B, nh, T, C // nh), leaf(B, nh, T, C // nh), leaf(B, nh, T, C // nh)
    lw, lb = leaf(C), leaf(C)
    return [
        ("linear", f"({B * T},{C})x({4 * C},{C})", lambda: F.linear(x, w, b), [x, w, b]),
        ("softmax", f"({B},{nh},{T},{T})", lambda: F.softmax(scores), [scores]),
        ("layer_norm", f"({B * T},{C})", lambda: F.layer_norm(x, C, lw, lb), [x, lw, lb]),
        ("gelu", f"({B * T},{4 * C})", lambda: F.gelu(x4), [x4]),
        ("gelu_tanh", f"({B * T},{4 * C})", lambda: F.gelu(x4, approximate="tanh"), [x4]),
        ("cross_entropy", f"({B * T},{V})", lambda: F.cross_entropy(logits, target), [logits]),
        ("embedding", f"({B},{T}) of ({V},{C})", lambda: F.embedding(idx, table), [table]),
        (
            "attention",
            f"({B},{nh},{T},{C // nh}) causal",
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            [q, k, v],
        ),
    ]


def _forward_backward(fn: Callable[[], tf.Tensor], leaves: list) -> Callable[[], None]:
    gy = np.ones_like(fn().data)

    def run() -> None:
        for t in leaves:
            t.grad = None
        fn().backward(gy)

    return run


def op_timings(shapes: dict[str, int] = BABY, repeats: int = 7) -> list[dict[str, Any]]:
    rows = []
    for name, shape, fn, leaves in _op_cases(shapes):
        t_fwd = median_time(fn, repeats)
        t_all = median_time(_forward_backward(fn, leaves), repeats)
        rows.append(
            {
                "op": name,
                "shape": shape,
                "forward_ms": t_fwd * 1e3,
                "backward_ms": (t_all - t_fwd) * 1e3,
                "total_ms": t_all * 1e3,
            }
        )
    return rows
