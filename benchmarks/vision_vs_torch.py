"""The tiny ViT and the CNN baseline on scikit-learn's digits: tinyformer against the same models
in PyTorch, same recipe, same batches, same augmentation. Prints a table and writes JSON.

    python benchmarks/vision_vs_torch.py                 # both models, both frameworks (~3 min)
    python benchmarks/vision_vs_torch.py --only tinyformer --models vit

Recipe (`tinyformer train vit` / `tinyformer train cnn` defaults): stratified 80/20 split with
seed 0, batches of 64 drawn at random, each image shifted by up to one pixel, AdamW lr 1e-3
(weight decay 0.05 on weight matrices), 100 warm-up steps then cosine decay to 1e-4, gradient
clipping at 1.0; 2500 steps for the ViT, 1500 for the CNN. Held-out accuracy is measured on the
359 held-out images. Each framework runs in its own process with 2 threads; tinyformer's gets
the settings `tinyformer train` runs with (`tinyformer.runtime.RUNTIME_ENV`). The two run in
lockstep, 100 steps at a time each, so that both see the same minutes of a shared machine
(benchmarks/lockstep.py); `--sequential` runs one after the other instead.

PyTorch (torch==2.13.0 CPU) is only a comparison here, never a dependency of tinyformer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from lockstep import FLAG, Pacer, run_children

ROOT = Path(__file__).resolve().parent.parent
CHUNK = 100  # steps each side runs before handing the machine over
BATCH, LR, MIN_LR, WARMUP, WD = 64, 1e-3, 1e-4, 100, 0.05


def lr_at(step: int, steps: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / (steps - WARMUP)
    return MIN_LR + 0.5 * (1 + math.cos(math.pi * progress)) * (LR - MIN_LR)


def data(steps: int):
    from tinyformer.data import load_digits
    from tinyformer.train.vision import shift_augment, split_indices

    images, labels = load_digits()
    train, val = split_indices(labels, 0.2, seed=0)
    x_train, y_train, rng = images[train], labels[train], np.random.default_rng(0)
    batches = []
    for _ in range(steps):
        idx = rng.integers(0, len(train), BATCH)
        batches.append((shift_augment(x_train[idx], rng, 1), y_train[idx]))
    return batches, images[val], labels[val]


def run_tinyformer(model: str, batches, x_val, y_val, pace):
    import tinyformer as tf
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups
    from tinyformer.train.vision import TrainVisionConfig, build_model, evaluate_model, model_config

    tf.manual_seed(0)
    net = build_model(model, model_config(TrainVisionConfig(model=model), x_val, 10))
    opt = AdamW(weight_decay_groups(net, WD), lr=LR)
    times = []
    for step, (x, y) in enumerate(batches):
        pace(step)
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, len(batches))
        _, loss = net(x, y)
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
    accuracy = evaluate_model(net, model, x_val, y_val, 10)["accuracy"]
    return times, accuracy, net.num_parameters()


def torch_model(model: str):
    import torch
    from torch import nn

    if model == "cnn":

        def stage(a, b):
            return [nn.Conv2d(a, b, 3, padding=1), nn.ReLU(), nn.Conv2d(b, b, 3, padding=1),
                    nn.ReLU(), nn.MaxPool2d(2)]  # fmt: skip

        return nn.Sequential(*stage(1, 16), *stage(16, 32), nn.Flatten(), nn.Linear(32 * 4, 10))

    class Block(nn.Module):
        def __init__(self, c=64, nh=4):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(c, eps=1e-6), nn.LayerNorm(c, eps=1e-6)
            self.attn = nn.MultiheadAttention(c, nh, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c))

        def forward(self, x):
            h = self.ln_1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln_2(x))

    class ViT(nn.Module):
        def __init__(self, c=64):
            super().__init__()
            self.patch = nn.Conv2d(1, c, 2, 2)
            self.cls = nn.Parameter(torch.randn(1, 1, c) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, 17, c) * 0.02)
            self.blocks = nn.Sequential(*(Block() for _ in range(4)))
            self.norm, self.head = nn.LayerNorm(c, eps=1e-6), nn.Linear(c, 10)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(len(x), -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])

    return ViT()


def run_torch(model: str, batches, x_val, y_val, pace):
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    net = torch_model(model)
    params = list(net.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WD},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    opt = torch.optim.AdamW(groups, lr=LR)
    times = []
    for step, (x, y) in enumerate(batches):
        pace(step)
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, len(batches))
        loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        times.append(time.perf_counter() - start)
    net.eval()
    with torch.no_grad():
        accuracy = (net(torch.from_numpy(x_val)).argmax(1).numpy() == y_val).mean()
    return times, float(accuracy), sum(p.numel() for p in params)


def steps(model: str) -> int:
    from tinyformer.train.vision.config import DEFAULT_ITERS  # the commands' step counts

    return DEFAULT_ITERS[model]


def child(framework: str, model: str, pace: Pacer) -> None:
    batches, x_val, y_val = data(steps(model))
    run = run_tinyformer if framework == "tinyformer" else run_torch
    times, accuracy, n_params = run(model, batches, x_val, y_val, pace)
    ms = np.array(times[len(times) // 10 :]) * 1e3
    print(json.dumps({"model": model, "framework": framework, "accuracy": accuracy,
                      "ms_per_step_median": float(np.median(ms)), "params": n_params}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="vit,cnn")
    parser.add_argument("--only", choices=["tinyformer", "torch"], default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench-vision")
    parser.add_argument("--sequential", action="store_true", help="one framework, then the other")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(FLAG, type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child, Pacer(args.lockstep_chunk))
    from tinyformer.bench import machine, print_table, save_json
    from tinyformer.runtime import RUNTIME_ENV

    frameworks = [args.only] if args.only else ["tinyformer", "torch"]
    envs = [{**RUNTIME_ENV, **os.environ} if f == "tinyformer" else None for f in frameworks]
    results = []
    for model in args.models.split(","):
        commands = [[sys.executable, __file__, "--child", f, model] for f in frameworks]
        names = [f"{f} {model}" for f in frameworks]
        chunk = 0 if args.sequential else CHUNK
        lines = run_children(names, commands, envs, steps(model), chunk)
        results += [json.loads(line) for line in lines]
    columns = ["model", "framework", "accuracy", "ms_per_step_median", "params"]
    print_table("Digits, same recipe and batches (held-out accuracy, 359 images)", results, columns)
    save_json(args.out / "vision_vs_torch.json", {"machine": machine(), "results": results})
    print(f"\nJSON: {args.out / 'vision_vs_torch.json'}")


if __name__ == "__main__":
    main()
