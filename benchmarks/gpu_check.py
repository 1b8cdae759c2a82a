"""One prepared check for a machine with an NVIDIA GPU: every op on the device against the host,
then a few hundred training steps of the baby GPT and the tiny ViT on the device against the
same steps on the host. Prints a table and writes JSON. Meant to finish in under 3 minutes.

    python benchmarks/gpu_check.py                      # on "cuda" (needs CuPy and a GPU)
    python benchmarks/gpu_check.py --device fake --steps 5   # the same script on CI's fake GPU

Op rows: forward value and input gradients of each op spec on the device, float32 and float64,
against the NumPy references on the host (largest relative difference). Model rows: the loss
after `--steps` AdamW steps on the same batches, on the device and on the host, and the median
step time on each (the device's includes the reads of the loss that the training loop makes).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import tinyformer as tf
from tinyformer import backend, registry
from tinyformer.testing import RandomDraw, all_specs


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


def check_ops(device: str, seeds: int) -> list[dict]:
    rows = []
    for spec in all_specs():
        for dtype in (np.float32, np.float64):
            worst, error = 0.0, None
            try:
                for seed in range(seeds):
                    sample = spec.sample(RandomDraw(seed))
                    with registry.prefer(registry.REFERENCE):
                        host = _run_op(spec, sample, dtype, "cpu")
                    dev = _run_op(spec, sample, dtype, device)
                    worst = max([worst, *(_relative(d, h) for d, h in zip(dev, host))])
            except Exception as e:  # a table row, not a crash: every op gets its line
                error = f"{type(e).__name__}: {e}"[:200]
            tol = 1e-4 if dtype == np.float32 else 1e-10
            ok = error is None and worst <= tol
            rows.append({"op": spec.name, "dtype": np.dtype(dtype).name, "max_rel": worst,
                         "ok": ok, "error": error})  # fmt: skip
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or fake")
    parser.add_argument("--steps", type=int, default=200, help="training steps per model")
    parser.add_argument("--seeds", type=int, default=2, help="random samples per op and dtype")
    parser.add_argument("--out", default="bench-results/gpu_check.json")
    args = parser.parse_args()
    device = backend.device(args.device)  # a missing GPU: DeviceUnavailable says why
    name = str(device)
    if device.type == "cuda":
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(device.index or 0)["name"].decode()
    ops = check_ops(args.device, args.seeds)
    bad = [r for r in ops if not r["ok"]]
    print(f"ops on {name}: {len(ops) - len(bad)} of {len(ops)} (op, dtype) pairs match the host")
    for r in bad:
        print(f"  {r['op']:32s} {r['dtype']:8s} max rel {r['max_rel']:.2e}  {r['error'] or ''}")
    models = [
        check_training("baby GPT", _gpt_step_fn, args.device, args.steps),
        check_training("tiny ViT", _vit_step_fn, args.device, args.steps),
    ]
    print(f"\n{'model':10s} {'steps':>5s} {'host loss':>10s} {'device loss':>12s} "
          f"{'host ms':>8s} {'device ms':>10s}")  # fmt: skip
    for r in models:
        print(f"{r['model']:10s} {r['steps']:5d} {r['host_loss']:10.4f} {r['device_loss']:12.4f} "
              f"{r['host_ms']:8.1f} {r['device_ms']:10.1f}")  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"device": name, "host": platform.processor() or platform.machine(),
              "ops": ops, "models": models}  # fmt: skip
    out.write_text(json.dumps(result, indent=2))
    print(f"\n{out}")


if __name__ == "__main__":
    main()
