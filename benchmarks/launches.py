"""GPU launches per training step, counted on the fake device: no GPU needed.

    python benchmarks/launches.py                 # baby GPT and tiny ViT, table + JSON
    python benchmarks/launches.py --top 40 --out bench-results

A step on `cuda` issues one launch per CUDA kernel, per CuPy elementwise or reduction call and
per cuBLAS call, whatever the arrays' sizes; at baby sizes the host's cost per launch is what a
step waits on (docs/cuda-kernels.md). This runs one AdamW step of each model on the fake
device with the CUDA kernels preferred (run by the CPU emulator), counts what the device layer
sees (`tinyformer.launches`), and prints the launches by op and direction.

The counts depend on the models' structure (layers, heads, which ops run), not on their widths,
so the models run at the baby recipes' depth with tiny widths: the emulator is slow. The totals
are the baby recipes' counts. `tests/test_launch_counts.py` keeps them from growing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def gpt_step(device: str = "fake", n_layer: int = 4) -> Callable[[], None]:
    """One baby-GPT step (benchmarks/gpt_vs_torch.py's recipe: 4 layers, 4 heads, AdamW,
    clipping), at a tiny width and context."""
    import tinyformer as tf
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups

    tf.manual_seed(0)
    model = GPT(GPTConfig(block_size=8, vocab_size=65, n_layer=n_layer, n_head=4, n_embd=16))
    model.to(device)
    optimizer = AdamW(weight_decay_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.99))
    data = np.random.default_rng(0).integers(0, 65, size=(2, 9))

    def step() -> None:
        _, loss = model(data[:, :-1], data[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def vit_step(device: str = "fake", n_layer: int = 4) -> Callable[[], None]:
    """One tiny-ViT step (benchmarks/gpu_check.py's: 4 layers, 4 heads, AdamW)."""
    import tinyformer as tf
    from tinyformer.models.vit import ViT, ViTConfig
    from tinyformer.optim import AdamW

    tf.manual_seed(0)
    config = ViTConfig(image_size=8, patch_size=2, in_channels=1, num_classes=10, n_embd=16,
                       n_layer=n_layer, n_head=4)  # fmt: skip
    model = ViT(config).to(device)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    images = rng.random((2, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 10, size=2)

    def step() -> None:
        _, loss = model(images, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


MODELS = {"baby GPT": gpt_step, "tiny ViT": vit_step}


def count(build: Callable[..., Callable[[], None]], **config: int):
    """The launches of the second step (the first builds the optimizer's state). The device
    checks queued before it are read first: their read comes every 64 checks (see
    `tinyformer.device_checks`), which would otherwise fall in this step or not by chance."""
    from tinyformer import device_checks, registry
    from tinyformer.launches import counting

    with registry.prefer("cuda"):
        step = build(**config)
        step()
        device_checks.run()
        with counting() as launches:
            step()
    return launches


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows per model (default 25)")
    default_out = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench-results"
    parser.add_argument("--out", type=Path, default=default_out, help="folder for the JSON")
    args = parser.parse_args(argv)
    results = {"machine": platform.processor() or platform.machine(), "models": {}}
    for name, build in MODELS.items():
        launches = count(build)
        print(f"\n{name}: launches per training step on cuda (counted on the fake device)")
        print(launches.table(args.top))
        results["models"][name] = {
            "total": launches.total, "by_kind": launches.by_kind(),
            "by_op": launches.by_label(),
        }  # fmt: skip
    from tinyformer.fileio import atomic_write

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "launches.json"
    text = json.dumps(results, indent=2) + "\n"
    atomic_write(path, lambda f: f.write(text))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
