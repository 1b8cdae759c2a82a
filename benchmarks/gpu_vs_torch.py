"""tinyformer on one NVIDIA GPU (CuPy and its CUDA kernels) beside PyTorch CUDA eager: the baby
GPT, the "small" GPT and the tiny ViT, same architectures, recipes and batches, one after the
other in the same process on the same GPU. Prints a table and writes JSON.

    python benchmarks/gpu_vs_torch.py                        # baby, small, vit
    python benchmarks/gpu_vs_torch.py --configs baby --iters 300
    python benchmarks/gpu_vs_torch.py --device fake --iters 3 --eval-batches 2 --configs baby

Configurations:
  baby   gpt_vs_torch.py's recipe (4 layers, 4 heads, width 128, context 64, batch 12), 2000
         iterations on Tiny Shakespeare, validation loss over 200 fixed batches;
  small  nanoGPT's shakespeare_char size (6 layers, 6 heads, width 384, context 256, batch 64),
         500 iterations, validation over 50 batches; dropout 0 on both sides;
  vit    vision_vs_torch.py's ViT on digits (patch 2, width 64, 4 blocks, batch 64), 300 steps:
         time per step and the training loss at the end.
ms/iter: the median gap between CUDA events recorded at every step boundary (the GPU's own
timeline), skipping the first 10% of steps (compiles, caches, the memory pool filling). Peak
memory: PyTorch's `max_memory_reserved`, CuPy's memory-pool total (both: memory held, freed
blocks included). `--device fake` runs tinyformer alone on the fake device with wall-clock
times, to check the script itself without a GPU.

PyTorch is only a comparison here, never a dependency of tinyformer.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from gpt_vs_torch import RECIPE, SHARED, batches, load_data, lr_at, torch_gpt

ROOT = Path(__file__).resolve().parent.parent
GPT_CONFIGS = {
    "baby": dict(RECIPE, iters=2000, eval_batches=200),
    "small": dict(RECIPE, n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64,
                  iters=500, eval_batches=50),
}  # fmt: skip
VIT_STEPS, VIT_BATCH = 300, 64


class Clock:
    """Step boundaries as CUDA events on a GPU (read after one sync at the end), wall-clock
    times elsewhere."""

    def __init__(self, framework: str, device: str) -> None:
        self.framework, self.device, self.marks = framework, device, []

    def mark(self) -> None:
        if self.device != "cuda":
            self.marks.append(time.perf_counter())
        elif self.framework == "torch":
            import torch

            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self.marks.append(event)
        else:
            import cupy

            event = cupy.cuda.Event()
            event.record()
            self.marks.append(event)

    def step_ms(self) -> list[float]:
        pairs = list(zip(self.marks, self.marks[1:]))
        if self.device != "cuda":
            return [1e3 * (b - a) for a, b in pairs]
        if self.framework == "torch":
            import torch

            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in pairs]
        import cupy

        cupy.cuda.get_current_stream().synchronize()
        return [cupy.cuda.get_elapsed_time(a, b) for a, b in pairs]


def _steady(ms: list[float]) -> float:
    return float(np.median(ms[len(ms) // 10 :]))


def _peak_mib(framework: str, device: str) -> float | None:
    if device != "cuda":
        return None
    if framework == "torch":
        import torch

        return torch.cuda.max_memory_reserved() / 2**20
    import cupy

    return cupy.get_default_memory_pool().total_bytes() / 2**20


def gpt_tinyformer(r: dict, data: tuple, device: str) -> dict[str, Any]:
    import tinyformer as tf
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups

    train, val, vocab = data
    tf.manual_seed(0)
    config = GPTConfig(r["block_size"], vocab, r["n_layer"], r["n_head"], r["n_embd"])
    model = GPT(config).to(device)
    opt = AdamW(weight_decay_groups(model, r["weight_decay"]), lr=r["lr"], betas=r["betas"])
    clock = Clock("tinyformer", device)
    for it, (x, y) in enumerate(batches(train, r["iters"], 1, r)):
        clock.mark()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, r["iters"], r)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
    clock.mark()
    ms = clock.step_ms()
    model.eval()
    with tf.no_grad():
        losses = [model(x, y)[1].item() for x, y in batches(val, r["eval_batches"], 2, r)]
    return {
        "ms_per_iter": _steady(ms),
        "val_loss": float(np.mean(losses)),
        "params": model.num_parameters(),
        "peak_mib": _peak_mib("tinyformer", device),
    }


def gpt_torch(r: dict, data: tuple) -> dict[str, Any]:
    import torch

    train, val, vocab = data
    torch.manual_seed(0)
    model = torch_gpt(vocab, r["n_layer"], r["n_head"], r["n_embd"], r["block_size"]).cuda()
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    opt = torch.optim.AdamW(groups, lr=r["lr"], betas=r["betas"])
    clock = Clock("torch", "cuda")
    for it, (x, y) in enumerate(batches(train, r["iters"], 1, r)):
        clock.mark()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, r["iters"], r)
        loss = model(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, r["grad_clip"])
        opt.step()
    clock.mark()
    ms = clock.step_ms()
    model.eval()
    with torch.no_grad():
        losses = [model(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()).item()
                  for x, y in batches(val, r["eval_batches"], 2, r)]  # fmt: skip
    return {
        "ms_per_iter": _steady(ms),
        "val_loss": float(np.mean(losses)),
        "params": sum(p.numel() for p in params),
        "peak_mib": _peak_mib("torch", "cuda"),
    }


def _digits(steps: int):
    from tinyformer.data import load_digits
    from tinyformer.train.vision import shift_augment, split_indices

    images, labels = load_digits()
    train, _ = split_indices(labels, 0.2, seed=0)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        idx = rng.choice(train, VIT_BATCH)
        out.append((shift_augment(images[idx], rng, 1), labels[idx]))
    return out, images


def vit_tinyformer(steps: int, device: str) -> dict[str, Any]:
    import tinyformer as tf
    from tinyformer.optim import AdamW
    from tinyformer.train.vision import TrainVisionConfig, build_model, model_config

    data, images = _digits(steps)
    tf.manual_seed(0)
    net = build_model("vit", model_config(TrainVisionConfig(model="vit"), images, 10)).to(device)
    opt = AdamW(net.parameters(), lr=1e-3)
    clock = Clock("tinyformer", device)
    for x, y in data:
        clock.mark()
        _, loss = net(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    clock.mark()
    return {
        "ms_per_iter": _steady(clock.step_ms()),
        "train_loss": loss.item(),
        "params": net.num_parameters(),
        "peak_mib": _peak_mib("tinyformer", device),
    }


def vit_torch(steps: int) -> dict[str, Any]:
    import torch
    from vision_vs_torch import torch_model

    data, _ = _digits(steps)
    torch.manual_seed(0)
    net = torch_model("vit").cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    clock = Clock("torch", "cuda")
    for x, y in data:
        clock.mark()
        logits = net(torch.from_numpy(x).cuda())
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(y).cuda())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    clock.mark()
    return {
        "ms_per_iter": _steady(clock.step_ms()),
        "train_loss": loss.item(),
        "params": sum(p.numel() for p in net.parameters()),
        "peak_mib": _peak_mib("torch", "cuda"),
    }


def gpu_name(device: str) -> str:
    if device != "cuda":
        return "fake device (CPU)"
    import cupy

    return cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()


def run(configs: list[str], device: str, iters: int | None, eval_batches: int | None,
        data_path: str) -> list[dict[str, Any]]:  # fmt: skip
    """Every configuration, tinyformer then (on a GPU) PyTorch; one row per (config, framework)."""
    rows = []
    frameworks = ["tinyformer", "torch"] if device == "cuda" else ["tinyformer"]
    data = load_data(data_path) if any(c in GPT_CONFIGS for c in configs) else None
    for name in configs:
        for framework in frameworks:
            if name in GPT_CONFIGS:
                r = dict(GPT_CONFIGS[name])
                r["iters"] = iters or r["iters"]
                r["eval_batches"] = eval_batches or r["eval_batches"]
                result = (
                    gpt_tinyformer(r, data, device)
                    if framework == "tinyformer"
                    else gpt_torch(r, data)
                )
                steps = r["iters"]
            else:
                steps = iters or VIT_STEPS
                result = (
                    vit_tinyformer(steps, device) if framework == "tinyformer" else vit_torch(steps)
                )
            rows.append({"config": name, "framework": framework, "iters": steps, **result})
            print(f"  {name:6s} {framework:10s} {result['ms_per_iter']:8.2f} ms/iter", flush=True)
    return rows


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per configuration: tinyformer's ms/iter over PyTorch's, and the loss difference."""
    out = []
    for name in dict.fromkeys(r["config"] for r in rows):
        pair = {r["framework"]: r for r in rows if r["config"] == name}
        if len(pair) == 2:
            tiny, ref = pair["tinyformer"], pair["torch"]
            key = "val_loss" if "val_loss" in tiny else "train_loss"
            out.append({"config": name, "ms_ratio": tiny["ms_per_iter"] / ref["ms_per_iter"],
                        f"{key}_diff": tiny[key] - ref[key]})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="+", default=["baby", "small", "vit"],
                        choices=[*GPT_CONFIGS, "vit"])  # fmt: skip
    parser.add_argument("--device", default="cuda", choices=["cuda", "fake"])
    parser.add_argument("--iters", type=int, default=None, help="override every config's count")
    parser.add_argument("--eval-batches", type=int, default=None)
    default_data = str(SHARED) if SHARED.exists() else "tinyshakespeare"
    parser.add_argument("--data", default=default_data, help="corpus name or path")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "gpu_vs_torch.json")
    args = parser.parse_args()

    import tinyformer as tf
    from tinyformer.bench import machine, print_table, save_json

    tf.device(args.device)  # a missing GPU: one line saying why
    name = gpu_name(args.device)
    print(f"on {name}:")
    rows = run(args.configs, args.device, args.iters, args.eval_batches, args.data)
    columns = ["config", "framework", "iters", "ms_per_iter", "val_loss", "train_loss",
               "peak_mib", "params"]  # fmt: skip
    print_table(f"tinyformer beside PyTorch CUDA eager on {name}", rows, columns)
    compared = ratios(rows)
    if compared:
        print_table("tinyformer / PyTorch", compared, list(compared[0]))
    save_json(args.out, {"gpu": name, "machine": machine(), "configs": GPT_CONFIGS,
                         "results": rows, "ratios": compared})  # fmt: skip
    print(f"\nJSON: {args.out}")
    if any(math.isnan(r.get("val_loss", 0.0)) for r in rows):
        raise SystemExit("a validation loss is NaN")


if __name__ == "__main__":
    main()
