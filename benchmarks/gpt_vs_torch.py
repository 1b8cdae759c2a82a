"""Baby GPT on Tiny Shakespeare: tinyformer against a PyTorch model of the same architecture,
trained with the same recipe on the same batches. Prints a table and writes JSON.

    python benchmarks/gpt_vs_torch.py                   # 2000 iterations each (~5 minutes)
    python benchmarks/gpt_vs_torch.py --iters 200 --only tinyformer

Recipe (nanoGPT's shakespeare_char, scaled to baby): 4 layers, 4 heads, width 128, context 64,
batch 12, AdamW lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on weight matrices, 100 warm-up
iterations then cosine decay to 1e-4, gradient clipping at 1.0, dropout 0. The validation loss
is the mean over 200 fixed batches. Each framework runs in its own process (their thread pools
would otherwise compete for the two cores), with 2 threads. tinyformer's process gets the
settings that `tinyformer train` uses (`tinyformer.runtime.RUNTIME_ENV`); PyTorch's runs with
its own defaults. The two run in lockstep, 50 iterations at a time each, so that both see the
same minutes of a shared machine (benchmarks/lockstep.py); `--sequential` runs one after the
other instead.

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
CHUNK = 50  # iterations each side runs before handing the machine over
SHARED = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
RECIPE = dict(
    n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, lr=1e-3, min_lr=1e-4,
    warmup=100, betas=(0.9, 0.99), weight_decay=0.1, grad_clip=1.0,
)  # fmt: skip


def lr_at(it: int, iters: int, r: dict = RECIPE) -> float:
    if it < r["warmup"]:
        return r["lr"] * (it + 1) / r["warmup"]
    progress = (it - r["warmup"]) / max(1, iters - r["warmup"])
    return r["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (r["lr"] - r["min_lr"])


def load_data(path: str) -> tuple[np.ndarray, np.ndarray, int]:
    from tinyformer.data import CharTokenizer, load_text

    text = load_text(path)
    tok = CharTokenizer.train(text)
    ids = np.array(tok.encode(text), dtype=np.int64)
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:], tok.vocab_size


def batches(data: np.ndarray, n: int, seed: int, r: dict = RECIPE):
    rng, t, b = np.random.default_rng(seed), r["block_size"], r["batch_size"]
    for _ in range(n):
        starts = rng.integers(0, len(data) - t, size=b)
        chunk = data[starts[:, None] + np.arange(t + 1)]
        yield chunk[:, :-1], chunk[:, 1:]


def run_tinyformer(train, val, vocab, iters, eval_batches, pace):
    import tinyformer as tf
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups

    r = RECIPE
    tf.manual_seed(0)
    model = GPT(GPTConfig(r["block_size"], vocab, r["n_layer"], r["n_head"], r["n_embd"]))
    opt = AdamW(weight_decay_groups(model, r["weight_decay"]), lr=r["lr"], betas=r["betas"])
    times = []
    for it, (x, y) in enumerate(batches(train, iters, seed=1)):
        pace(it)
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, iters)
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(model.parameters(), r["grad_clip"])
        opt.step()
        times.append(time.perf_counter() - start)
    model.eval()
    with tf.no_grad():
        val_loss = np.mean([model(x, y)[1].item() for x, y in batches(val, eval_batches, 2)])
    return times, float(val_loss), model.num_parameters()


def torch_gpt(vocab: int, n_layer: int, n_head: int, n_embd: int, block_size: int):
    """The baby GPT's architecture in PyTorch: tinyformer's GPT, layer for layer, with nanoGPT's
    initialisation (also used by gpu_vs_torch.py)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    c, nh = n_embd, n_head

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
            self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
            self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, nh, c // nh).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block_size, c)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f = nn.LayerNorm(c)
            self.lm_head = nn.Linear(c, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, std=0.02 / math.sqrt(2 * n_layer))
                elif p.dim() == 2:
                    nn.init.normal_(p, std=0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    return GPT()


def run_torch(train, val, vocab, iters, eval_batches, pace):
    import torch

    torch.set_num_threads(2)
    torch.manual_seed(0)
    r = RECIPE
    model = torch_gpt(vocab, r["n_layer"], r["n_head"], r["n_embd"], r["block_size"])
    params = list(model.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=r["lr"], betas=r["betas"])
    times = []
    for it, (x, y) in enumerate(batches(train, iters, seed=1)):
        pace(it)
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, iters)
        loss = model(torch.from_numpy(x), torch.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, r["grad_clip"])
        opt.step()
        times.append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        losses = [model(torch.from_numpy(x), torch.from_numpy(y)).item()
                  for x, y in batches(val, eval_batches, 2)]  # fmt: skip
    return times, float(np.mean(losses)), sum(p.numel() for p in params)


def child(framework: str, data: str, iters: int, eval_batches: int, pace: Pacer) -> None:
    """Run one framework and print its result as JSON on the last line."""
    train, val, vocab = load_data(data)
    run = run_tinyformer if framework == "tinyformer" else run_torch
    times, val_loss, n_params = run(train, val, vocab, iters, eval_batches, pace)
    ms = np.array(times[len(times) // 10 :]) * 1e3  # steady state: skip the first 10% (JIT, caches)
    print(json.dumps({
        "framework": framework, "iters": iters, "val_loss": val_loss, "params": n_params,
        "ms_per_iter_median": float(np.median(ms)), "ms_per_iter_mean": float(ms.mean()),
        "train_s": float(np.sum(times)), "peak_rss_mib": _peak_rss_mib(),
    }))  # fmt: skip


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_data = str(SHARED) if SHARED.exists() else "tinyshakespeare"
    parser.add_argument("--data", default=default_data, help="corpus name or path")
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--eval-batches", type=int, default=200)
    parser.add_argument("--only", choices=["tinyformer", "torch"], default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench-gpt")
    parser.add_argument("--sequential", action="store_true", help="one framework, then the other")
    parser.add_argument("--child", choices=["tinyformer", "torch"], help=argparse.SUPPRESS)
    parser.add_argument(FLAG, type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        pace = Pacer(args.lockstep_chunk)
        return child(args.child, args.data, args.iters, args.eval_batches, pace)

    from tinyformer.runtime import RUNTIME_ENV  # the settings `tinyformer train` runs with

    frameworks = [args.only] if args.only else ["tinyformer", "torch"]
    shared = ["--data", args.data, "--iters", str(args.iters)]
    shared += ["--eval-batches", str(args.eval_batches)]
    commands = [[sys.executable, __file__, "--child", f, *shared] for f in frameworks]
    envs = [{**RUNTIME_ENV, **os.environ} if f == "tinyformer" else None for f in frameworks]
    chunk = 0 if args.sequential else CHUNK
    lines = run_children(frameworks, commands, envs, args.iters, chunk)
    results = [json.loads(line) for line in lines]

    from tinyformer.bench import machine, print_table, save_json

    columns = ["framework", "iters", "val_loss", "ms_per_iter_median", "ms_per_iter_mean",
               "peak_rss_mib", "params", "train_s"]  # fmt: skip
    print_table(f"Baby GPT on {Path(args.data).name}, same recipe and batches", results, columns)
    if len(results) == 2:
        tiny, ref = results
        print(
            f"\nval loss difference (tinyformer - torch): {tiny['val_loss'] - ref['val_loss']:+.4f}"
        )
        ratio = tiny["ms_per_iter_median"] / ref["ms_per_iter_median"]
        print(f"ms/iter ratio (tinyformer / torch): {ratio:.2f}")
    save_json(args.out / "gpt_vs_torch.json", {"machine": machine(), "recipe": RECIPE,
                                               "results": results})  # fmt: skip
    print(f"\nJSON: {args.out / 'gpt_vs_torch.json'}")


if __name__ == "__main__":
    main()
