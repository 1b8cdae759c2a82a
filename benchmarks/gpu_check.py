"""One prepared check for a machine with an NVIDIA GPU, in parts, each printing a table and all
writing JSON (into $OUT when it is set, as on a lent GPU machine). Meant for one call of
under 6 minutes:

    python benchmarks/gpu_check.py                      # on "cuda" (needs CuPy and a GPU)
    python benchmarks/gpu_check.py --device fake --steps 5   # ops and models on CI's fake GPU

Parts (`--parts`; on cuda all of them, on the fake device ops and models):
  tests    the GPU tests, in a pytest subprocess: the CUDA kernels against their references
           at baby and small GPT sizes and in the generic suite, NVRTC, the multi-tensor AdamW;
  ops      forward value and input gradients of each op spec on the device, float32 and
           float64, against the NumPy references on the host (largest relative difference);
  kernels  each CUDA kernel's time per call at baby and small GPT sizes beside its reference
           (CuPy calls) and PyTorch's own op, from CUDA events around repeated calls;
  models   the loss after `--steps` AdamW steps of the baby GPT and the tiny ViT on the same
           batches on the device and on the host, and the median step time on each;
  graphs   benchmarks/graphs_vs_torch.py: the baby GPT's step with forward and backward
           captured as a CUDA graph (tinyformer.cuda.graphs) beside eager, and PyTorch eager
           and torch.compile(mode="reduce-overhead"), in a subprocess;
  bench    benchmarks/gpu_vs_torch.py: baby, small and ViT beside PyTorch CUDA eager.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import tinyformer as tf
from tinyformer import backend, registry
from tinyformer.testing import RandomDraw, all_specs

ROOT = Path(__file__).resolve().parent.parent
PARTS = ["tests", "ops", "kernels", "models", "graphs", "bench"]


def _run_op(spec, sample, dtype, device):
    inputs = []
    for a in sample.args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            inputs.append(tf.Tensor(a.astype(dtype), requires_grad=True).to(device))
        elif isinstance(a, np.ndarray):
            inputs.append(tf.Tensor(a).to(device))
        else:
            inputs.append(a)
    kwargs = {
        k: tf.Tensor(v).to(device).data if isinstance(v, np.ndarray) else v
        for k, v in sample.kwargs.items()
    }
    y = spec.fn(*inputs, **kwargs)
    leaves = [t for t in inputs if isinstance(t, tf.Tensor) and t.requires_grad]
    gy = np.random.default_rng(0).standard_normal(y.shape).astype(y.dtype)
    grads = tf.grad(y, leaves, tf.Tensor(gy).to(device)) if y.requires_grad else []
    return [backend.to_host(y.data)] + [backend.to_host(g) for g in grads if g is not None]


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    scale = max(1e-12, float(np.abs(b).max(initial=0.0)))
    return float(np.abs(a - b).max(initial=0.0)) / scale


# float32 results on two machines add in different orders; where an op's result is itself a
# small difference of large terms (a layer norm over 2 features, say), the float32 reference is
# off from the float64 truth by more than TOL. There the device passes if it is no further from
# the truth than SLACK times the float32 reference is.
TOL = {"float32": 1e-4, "float64": 1e-10}
SLACK = 2.0


def verdict(device: list, host: list, truth: list | None, dtype: str) -> dict:
    """Compare each output (value, then gradients) of one sample: the device's result against
    the host's reference in the same dtype and, where that differs by more than TOL, against
    the float64 truth."""
    to_host = max((_relative(d, h) for d, h in zip(device, host)), default=0.0)
    row = {"max_rel": to_host, "ok": to_host <= TOL[dtype]}
    if not row["ok"] and truth is not None:
        dev = max(_relative(d, t) for d, t in zip(device, truth))
        ref = max(_relative(h, t) for h, t in zip(host, truth))
        row.update(device_to_truth=dev, reference_to_truth=ref, ok=dev <= SLACK * ref)
    return row


def check_ops(device: str, seeds: int) -> list[dict]:
    rows = []
    for spec in all_specs():
        for dtype in ("float32", "float64"):
            samples, error = [], None
            try:
                for seed in range(seeds):
                    sample = spec.sample(RandomDraw(seed))
                    with registry.prefer(registry.REFERENCE):
                        host = _run_op(spec, sample, np.dtype(dtype), "cpu")
                        truth = None
                        if dtype == "float32":
                            truth = _run_op(spec, sample, np.float64, "cpu")
                    dev = _run_op(spec, sample, np.dtype(dtype), device)
                    samples.append(verdict(dev, host, truth, dtype))
            except Exception as e:  # a table row, not a crash: every op gets its line
                error = f"{type(e).__name__}: {e}"[:200]
            failed = [v for v in samples if not v["ok"]]
            worst = failed[0] if failed else max(samples, key=lambda v: v["max_rel"], default={})
            row = {"op": spec.name, "dtype": dtype, "max_rel": 0.0, **worst}
            row["ok"] = error is None and not failed
            if error:
                row["error"] = error
            rows.append(row)
    return rows


def _gpt_step_fn(device: str, steps: int):
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW

    tf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128))
    model.to(device)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    data = rng.integers(0, 65, size=(steps, 12, 65))
    return model, optimizer, [(d[:, :-1], d[:, 1:]) for d in data]


def _vit_step_fn(device: str, steps: int):
    from tinyformer.models.vit import ViT, ViTConfig
    from tinyformer.optim import AdamW

    tf.manual_seed(0)
    config = ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=10, n_embd=64,
                       n_layer=4, n_head=4)  # fmt: skip
    model = ViT(config).to(device)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    images = rng.random((steps, 64, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, size=(steps, 64))
    return model, optimizer, list(zip(images, labels))


def check_training(name: str, build, device: str, steps: int) -> dict:
    row = {"model": name, "steps": steps}
    for where in ("cpu", device):
        model, optimizer, batches = build(where, steps)
        times, loss = [], None
        for inputs, targets in batches:
            start = time.perf_counter()
            _, loss = model(inputs, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            value = loss.item()  # the loop reads it every step
            times.append(time.perf_counter() - start)
        key = "host" if where == "cpu" else "device"
        row[f"{key}_loss"] = value
        row[f"{key}_ms"] = 1e3 * float(np.median(times[len(times) // 10 :]))
    row["loss_diff"] = abs(row["device_loss"] - row["host_loss"])
    return row


def _subprocess_part(name: str, argv: list[str], timeout: int) -> dict:
    """Run one part as its own process (a crash or a hang costs that part, not the check)."""
    import subprocess
    import sys

    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)  # fmt: skip
        output, rc = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as e:
        output, rc = f"{e.stdout or ''}{e.stderr or ''}\n(timed out after {timeout} s)", 124
    print(output[-4000:], flush=True)
    return {"part": name, "rc": rc, "seconds": round(time.perf_counter() - start, 1),
            "tail": output[-2000:]}  # fmt: skip


def save(out: Path, result: dict) -> None:
    """Write the JSON after every part, so that a part that hangs keeps those before it."""
    out.write_text(json.dumps(result, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or fake")
    parser.add_argument("--steps", type=int, default=100, help="training steps per model")
    parser.add_argument("--seeds", type=int, default=2, help="random samples per op and dtype")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=None)
    parser.add_argument("--data", default=None, help="corpus for the bench part (name or path)")
    parser.add_argument("--bench-iters", type=int, default=None,
                        help="override the bench part's iterations per config")  # fmt: skip
    default_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench-results"
    parser.add_argument("--out", default=str(default_dir / "gpu_check.json"))
    args = parser.parse_args()
    device = backend.device(args.device)  # a missing GPU: DeviceUnavailable says why
    parts = args.parts or (PARTS if device.type == "cuda" else ["ops", "models"])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    name = str(device)
    if device.type == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(device.index or 0)["name"].decode()
    print(f"gpu_check on {name}: {', '.join(parts)}", flush=True)
    result: dict = {"device": name, "host": platform.processor() or platform.machine(), "parts": []}
    if "tests" in parts:
        tests = ["tests/test_cuda_gpu.py", "tests/test_cuda_kernels.py", "tests/test_adamw_many.py",
                 "tests/test_ops_generic.py", "tests/test_device_training.py",
                 "tests/test_cuda_gemm.py", "tests/test_cuda_graphs.py"]  # fmt: skip
        argv = [
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *tests,
            "-k",
            "cuda or many or device",
        ]
        result["parts"].append(_subprocess_part("tests", argv, 240))
        save(out, result)
    if "ops" in parts:
        result["ops"] = check_ops(args.device, args.seeds)
        bad = [r for r in result["ops"] if not r["ok"]]
        print(f"ops on {name}: {len(result['ops']) - len(bad)} of {len(result['ops'])} "
              "(op, dtype) pairs match the host")  # fmt: skip
        for r in bad:
            print(
                f"  {r['op']:32s} {r['dtype']:8s} max rel {r['max_rel']:.2e}  {r.get('error', '')}"
            )
        for r in result["ops"]:
            if "device_to_truth" in r and r["ok"]:
                print(f"  {r['op']:32s} {r['dtype']:8s} max rel {r['max_rel']:.2e} to the host, "
                      f"{r['device_to_truth']:.2e} to float64 (the host's own: "
                      f"{r['reference_to_truth']:.2e})")  # fmt: skip
        save(out, result)
    if "kernels" in parts:
        argv = ["benchmarks/cuda_kernels_vs_torch.py", "--device", args.device,
                "--out", str(out.parent / "cuda_kernels.json")]  # fmt: skip
        result["parts"].append(_subprocess_part("kernels", argv, 120))
        save(out, result)
    if "models" in parts:
        result["models"] = [
            check_training("baby GPT", _gpt_step_fn, args.device, args.steps),
            check_training("tiny ViT", _vit_step_fn, args.device, args.steps),
        ]
        print(f"\n{'model':10s} {'steps':>5s} {'host loss':>10s} {'device loss':>12s} "
              f"{'host ms':>8s} {'device ms':>10s}")  # fmt: skip
        for r in result["models"]:
            losses = f"{r['host_loss']:10.4f} {r['device_loss']:12.4f}"
            times = f"{r['host_ms']:8.1f} {r['device_ms']:10.1f}"
            print(f"{r['model']:10s} {r['steps']:5d} {losses} {times}")
        save(out, result)
    if "graphs" in parts:
        graphs_out = out.parent / "graphs_vs_torch.json"
        graphs_out.unlink(missing_ok=True)  # a failed run must not leave an older run's rows
        argv = ["benchmarks/graphs_vs_torch.py", "--device", args.device, "--out", str(graphs_out)]
        if device.type != "cuda":  # the emulator: a toy step, once
            argv += ["--warmup", "0", "--iters", "1"]
        result["parts"].append(_subprocess_part("graphs", argv, 180))
        if graphs_out.exists():
            result["graphs"] = json.loads(graphs_out.read_text())["rows"]
        save(out, result)
    if "bench" in parts:
        argv = ["benchmarks/gpu_vs_torch.py", "--device", args.device,
                "--out", str(out.parent / "gpu_vs_torch.json")]  # fmt: skip
        if args.data:
            argv += ["--data", args.data]
        if args.bench_iters:
            argv += ["--iters", str(args.bench_iters)]
        result["parts"].append(_subprocess_part("bench", argv, 300))
    for part in result["parts"]:
        print(f"part {part['part']}: exit {part['rc']} in {part['seconds']} s")
    save(out, result)
    print(f"\n{out}")


if __name__ == "__main__":
    main()
