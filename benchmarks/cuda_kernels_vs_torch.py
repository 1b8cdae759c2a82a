"""Each CUDA kernel's time per call beside its reference (the same math as CuPy calls) and
PyTorch's own op, at the sizes the baby and small GPTs call them, on one GPU. Prints a table
and writes JSON.

    python benchmarks/cuda_kernels_vs_torch.py               # needs CuPy, a GPU, and torch
    python benchmarks/cuda_kernels_vs_torch.py --device fake --repeats 1 --sizes tiny

Times: CUDA events around `--repeats` back-to-back calls from Python after 3 warm-up calls,
divided by the count; so a call's time includes its launches' cost where the GPU waits for
Python (the launch-bound regime these sizes are in). The cases are the GPU tests' own
(`tinyformer.testing.kernel_cases`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer import registry
from tinyformer.testing.kernel_cases import SIZES, kernel_cases, to_device

ROOT = Path(__file__).resolve().parent.parent


def _timer(device: str, fn: Callable[[], Any], repeats: int) -> float:
    """Microseconds per call. Warm-up calls only on a GPU: on the fake device, which checks
    the script, the times mean nothing and every emulated launch is slow."""
    for _ in range(3 if device == "cuda" else 0):
        fn()
    if device != "cuda":
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        return 1e6 * (time.perf_counter() - start) / repeats
    import cupy

    begin, end = cupy.cuda.Event(), cupy.cuda.Event()
    begin.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return 1e3 * cupy.cuda.get_elapsed_time(begin, end) / repeats


def _torch_op(name: str, args: tuple) -> Callable[[], Any] | None:
    """PyTorch's own op for a case, on the same values, or None where it has no single one."""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    t = [torch.as_tensor(np.asarray(a)).cuda() if isinstance(a, np.ndarray) else a for a in args]
    if name == "softmax.forward":
        return lambda: torch.softmax(t[0], -1)
    if name == "log_softmax.forward":
        return lambda: torch.log_softmax(t[0], -1)
    if name == "cross_entropy.forward":
        return lambda: F.cross_entropy(t[0], t[1], ignore_index=t[2], label_smoothing=t[3],
                                       reduction="none")  # fmt: skip
    if name == "layer_norm.forward":
        return lambda: F.layer_norm(t[0], t[1].shape, t[1], t[2], t[3])
    if name == "gelu.forward":
        return lambda: F.gelu(t[0], approximate=t[1])
    if name == "dropout.forward":
        return lambda: F.dropout(t[0], t[1])
    if name == "attention.forward":
        return lambda: F.scaled_dot_product_attention(t[0], t[1], t[2], is_causal=t[4])
    return None


def measure(device: str, sizes: list[str], repeats: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        for name, host_args, _ in kernel_cases(size, np.float32):
            if "cuda" not in registry.backends(name):
                continue
            args = tuple(to_device(device, a) for a in host_args)
            row: dict[str, Any] = {"size": size, "primitive": name}
            call = lambda name=name, args=args: registry.call(name, *args)  # noqa: E731
            with registry.prefer("cuda"):
                row["kernel_us"] = _timer(device, call, repeats)
            with registry.prefer(registry.REFERENCE):
                row["reference_us"] = _timer(device, call, repeats)
            torch_fn = _torch_op(name, host_args) if device == "cuda" else None
            row["torch_us"] = _timer(device, torch_fn, repeats) if torch_fn else None
            if isinstance(host_args[-1], str):
                row["primitive"] = f"{name} ({host_args[-1]})"
            elif name.startswith("attention"):
                row["primitive"] = f"{name} ({'causal' if host_args[4] else 'full'})"
            rows.append(row)
            print(f"  {size:5s} {row['primitive']:34s} {row['kernel_us']:9.1f} us", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "fake"])
    parser.add_argument("--sizes", nargs="+", default=["baby", "small"], choices=list(SIZES))
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "cuda_kernels.json")
    args = parser.parse_args()

    import tinyformer as tf
    from tinyformer.bench import machine, print_table, save_json

    tf.device(args.device)
    rows = measure(args.device, args.sizes, args.repeats)
    columns = ["size", "primitive", "kernel_us", "reference_us", "torch_us"]
    print_table(f"CUDA kernels, float32, us per call ({args.device})", rows, columns)
    gpu = args.device
    if args.device == "cuda":
        import cupy

        gpu = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    save_json(args.out, {"gpu": gpu, "machine": machine(), "results": rows})
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
