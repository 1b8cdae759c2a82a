"""Where a baby GPT step's time goes on a GPU: the host's time to issue a step against the GPU's
time to run it, then a cProfile of the host side grouped by tinyformer file, and the embedding
backward's pieces. Prints tables and writes JSON (into $OUT when it is set).

    python3 benchmarks/gpu_profile.py                      # on cuda
    python benchmarks/gpu_profile.py --device fake --steps 5

A step is launch-bound when the host's time to issue it (no sync) is about the GPU's time per
step: the GPU waits for Python. Then the step gets faster only with fewer or cheaper calls.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from gpt_vs_torch import RECIPE, lr_at

ROOT = Path(__file__).resolve().parent.parent


def _sync(device: str) -> None:
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def build(device: str):
    import tinyformer as tf
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups

    r = RECIPE
    tf.manual_seed(0)
    config = GPTConfig(r["block_size"], 65, r["n_layer"], r["n_head"], r["n_embd"])
    model = GPT(config).to(device)
    opt = AdamW(weight_decay_groups(model, r["weight_decay"]), lr=r["lr"], betas=r["betas"])
    rng = np.random.default_rng(0)

    def step(it: int) -> None:
        data = rng.integers(0, 65, size=(r["batch_size"], r["block_size"] + 1))
        for group in opt.param_groups:
            group["lr"] = lr_at(it, 2000, r)
        _, loss = model(data[:, :-1], data[:, 1:])
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()

    return step


def host_and_device_ms(step, device: str, steps: int) -> dict:
    for it in range(5):
        step(it)
    _sync(device)
    issue = []
    start = time.perf_counter()
    for it in range(steps):
        t = time.perf_counter()
        step(it)
        issue.append(time.perf_counter() - t)
    _sync(device)
    total = time.perf_counter() - start
    return {"issue_ms": 1e3 * float(np.median(issue)), "wall_ms": 1e3 * total / steps}


def profile(step, device: str, steps: int, top: int) -> dict:
    profiler = cProfile.Profile()
    profiler.enable()
    for it in range(steps):
        step(it)
    _sync(device)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    by_file: dict[str, float] = defaultdict(float)
    rows = []
    for (file, line, name), (_, calls, tottime, cumtime, _) in stats.items():
        short = file.split("tinyformer/")[-1] if "tinyformer" in file else file.split("/")[-1]
        by_file[short] += tottime
        rows.append((tottime, cumtime, calls, f"{short}:{line}({name})"))
    rows.sort(reverse=True)
    files = sorted(by_file.items(), key=lambda kv: -kv[1])[:top]
    print(f"\nhost time per step by file (tottime, ms/step), {steps} steps")
    for f, t in files:
        print(f"  {1e3 * t / steps:8.3f}  {f}")
    print("\nfunctions by own time (ms/step, calls/step)")
    for tot, cum, calls, name in rows[:top]:
        print(f"  {1e3 * tot / steps:8.3f} {1e3 * cum / steps:8.3f} {calls / steps:7.1f}  {name}")
    return {
        "by_file_ms": {f: 1e3 * t / steps for f, t in files},
        "functions": [
            {"name": n, "own_ms": 1e3 * t / steps, "cum_ms": 1e3 * c / steps, "calls": k / steps}
            for t, c, k, n in rows[:top]
        ],  # fmt: skip
    }


def embedding_pieces(device: str) -> dict:
    """The embedding backward's sort, its kernel and the reference's add.at, per call."""
    if device != "cuda":
        return {}
    import cupy
    from cupyx.profiler import benchmark

    from tinyformer.kernels.cuda.embedding import embedding_backward
    from tinyformer.ops.embedding import embedding_backward as reference

    rng = np.random.default_rng(0)
    gy = cupy.asarray(rng.standard_normal((12 * 64, 128)).astype(np.float32))
    idx = cupy.asarray(rng.integers(0, 65, 12 * 64))
    cases = {
        "argsort int32 stable": lambda: cupy.argsort(idx.astype(cupy.int32), kind="stable"),
        "kernel (sort + 2 passes)": lambda: embedding_backward(gy, idx, 65, None),
        "reference add.at": lambda: reference(gy, idx, 65, None),
    }
    out = {}
    print("\nembedding backward, baby size (768 rows x 128, 65 rows), us per call")
    for name, fn in cases.items():
        b = benchmark(fn, n_repeat=200, n_warmup=20)
        out[name] = {"cpu_us": 1e6 * float(np.mean(b.cpu_times)),
                     "gpu_us": 1e6 * float(np.mean(b.gpu_times))}  # fmt: skip
        print(f"  {name:28s} cpu {out[name]['cpu_us']:8.1f}  gpu {out[name]['gpu_us']:8.1f}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--top", type=int, default=30)
    default_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench-results"
    parser.add_argument("--out", type=Path, default=default_dir / "gpu_profile.json")
    args = parser.parse_args()
    step = build(args.device)
    result = {"device": args.device, "steps": args.steps}
    result["timing"] = host_and_device_ms(step, args.device, args.steps)
    print(f"baby GPT step on {args.device}: host issues it in "
          f"{result['timing']['issue_ms']:.2f} ms, one step takes "
          f"{result['timing']['wall_ms']:.2f} ms end to end")  # fmt: skip
    result["profile"] = profile(step, args.device, args.steps, args.top)
    result["embedding"] = embedding_pieces(args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"\n{args.out}")


if __name__ == "__main__":
    main()
