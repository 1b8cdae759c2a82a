"""The six small models of a character-level language model (makemore's: bigram, MLP, RNN, GRU,
bag of words, a 4-layer transformer), trained by one plain script in tinyformer and in PyTorch
CPU: ms/step of each, side by side. Prints a table and writes JSON.

    python -m benchmarks.small_models [--steps 60] [--rounds 2] [--words FILE]

The models are written once, against the PyTorch names (`t.nn`, `F`, `t.cat`, ...), and each
framework runs them with its own module bound to `t`: the script is the same, its imports
changed only. Sizes are makemore's defaults: context 16, width 64 (n_embd and n_embd2), 4 heads
and 4 layers for the transformer, batch 32, vocabulary 27 (a-z and the start/end token), AdamW
(lr 5e-4, weight decay 0.01, betas 0.9/0.99). makemore writes its GELU out (`NewGELU`); here it
is `nn.GELU(approximate="tanh")`, the same function.

The words are names-like strings made offline from a seeded generator (syllables), or the lines
of `--words FILE` (makemore's names.txt, say). Each framework runs in its own process, all six
models one after the other, `--steps` steps each after 20 warm-up steps (JIT compiles, first
allocations); a model's figure is the median step. PyTorch runs on 1 and on 2 threads; the ratio
is tinyformer's against the faster of the two. Rounds alternate the order of the processes, so
that a slow spell of a shared machine falls on each; a cell is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("bigram", "mlp", "rnn", "gru", "bow", "transformer")
CONFIG = {"block_size": 16, "n_embd": 64, "n_embd2": 64, "n_head": 4, "n_layer": 4, "batch": 32}
WARMUP = 20


def make_words(n: int = 4000, seed: int = 0) -> list[str]:
    """`n` pronounceable names-like words of 2-15 letters, from syllables (no download)."""
    rng = np.random.default_rng(seed)
    onsets = "b c d f g h j k l m n p r s t v w y z br ch cl dr gr kr sh st th tr".split()
    vowels = "a e i o u y ae ai ea ee ia ie io oa ou".split()
    codas = ["", "", "", "n", "l", "r", "s", "th", "nd", "x", "h", "m"]
    words = []
    while len(words) < n:
        word = "".join(
            rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
            for _ in range(rng.integers(1, 4))
        )
        if 2 <= len(word) <= 15:
            words.append(word)
    return words


def encode(words: list[str], block: int) -> tuple[np.ndarray, np.ndarray]:
    """makemore's examples: x = start token (0) then the letters, y = the letters then the end
    token (0), padded with 0 in x and -1 (ignored) in y."""
    xs = np.zeros((len(words), block), np.int64)
    ys = np.full((len(words), block), -1, np.int64)
    for i, w in enumerate(words):
        ids = [ord(c) - ord("a") + 1 for c in w[: block - 1]]
        xs[i, 1 : 1 + len(ids)] = ids
        ys[i, : len(ids)] = ids
        ys[i, len(ids)] = 0
    return xs, ys


def build(t: Any, kind: str, vocab: int = 27, cfg: dict = CONFIG) -> Any:
    """makemore's model `kind`, written with the PyTorch names of module `t`."""
    nn, F = t.nn, t.nn.functional
    block, n_embd, n_embd2 = cfg["block_size"], cfg["n_embd"], cfg["n_embd2"]

    class Bigram(nn.Module):
        def __init__(self):
            super().__init__()
            self.logits = nn.Parameter(t.zeros((vocab, vocab)))

        def forward(self, idx):
            return self.logits[idx]

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab + 1, n_embd)  # token `vocab`: before the start
            self.mlp = nn.Sequential(
                nn.Linear(block * n_embd, n_embd2), nn.Tanh(), nn.Linear(n_embd2, vocab)
            )

        def forward(self, idx):
            embs = []
            for _ in range(block):
                embs.append(self.wte(idx))
                idx = t.roll(idx, 1, 1)
                idx[:, 0] = vocab
            return self.mlp(t.cat(embs, -1))

    class RNNCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.xh_to_h = nn.Linear(n_embd + n_embd2, n_embd2)

        def forward(self, xt, hprev):
            return F.tanh(self.xh_to_h(t.cat([xt, hprev], dim=1)))

    class GRUCell(nn.Module):
        def __init__(self):
            super().__init__()
            self.xh_to_z = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_r = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_hbar = nn.Linear(n_embd + n_embd2, n_embd2)

        def forward(self, xt, hprev):
            xh = t.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            hbar = F.tanh(self.xh_to_hbar(t.cat([xt, r * hprev], dim=1)))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.start = nn.Parameter(t.zeros(1, n_embd2))
            self.wte = nn.Embedding(vocab, n_embd)
            self.cell = cell
            self.lm_head = nn.Linear(n_embd2, vocab)

        def forward(self, idx):
            b, steps = idx.size()
            emb = self.wte(idx)  # (b, t, n_embd)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(steps):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            return self.lm_head(t.stack(hiddens, 1))

    class CausalBoW(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("bias", t.tril(t.ones(block, block)).view(1, block, block))

        def forward(self, x):
            B, T, C = x.size()
            att = t.zeros((B, T, T))
            att = att.masked_fill(self.bias[:, :T, :T] == 0, float("-inf"))
            return F.softmax(att, dim=-1) @ x  # (B, T, T) x (B, T, C): averages of the past

    class BoW(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.cbow = CausalBoW()
            self.c_fc, self.c_proj = nn.Linear(n_embd, n_embd2), nn.Linear(n_embd2, n_embd)
            self.lm_head = nn.Linear(n_embd, vocab)

        def forward(self, idx):
            pos = t.arange(0, idx.size(1), dtype=t.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            x = x + self.cbow(x)
            x = x + self.c_proj(F.tanh(self.c_fc(x)))
            return self.lm_head(x)

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.c_proj = nn.Linear(n_embd, n_embd)
            mask = t.tril(t.ones(block, block)).view(1, 1, block, block)
            self.register_buffer("bias", mask)

        def forward(self, x):
            B, T, C = x.size()
            nh = cfg["n_head"]
            q, k, v = self.c_attn(x).split(n_embd, dim=2)
            q, k, v = (
                a.view(B, T, nh, C // nh).transpose(1, 2) for a in (q, k, v)
            )  # (B, nh, T, hs)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")), dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
            self.attn = SelfAttention()
            self.mlp = nn.Sequential(
                nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                nn.Linear(4 * n_embd, n_embd),
            )  # fmt: skip

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, n_embd)
            self.wpe = nn.Embedding(block, n_embd)
            self.h = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab, bias=False)

        def forward(self, idx):
            pos = t.arange(0, idx.size(1), dtype=t.long).unsqueeze(0)
            x = self.wte(idx) + self.wpe(pos)
            for block_ in self.h:
                x = block_(x)
            return self.lm_head(self.ln_f(x))

    makers = {
        "bigram": Bigram, "mlp": MLP, "rnn": lambda: RNN(RNNCell()),
        "gru": lambda: RNN(GRUCell()), "bow": BoW, "transformer": Transformer,
    }  # fmt: skip
    return makers[kind]()


def train(t: Any, kind: str, xs: np.ndarray, ys: np.ndarray, steps: int) -> dict[str, float]:
    """Train model `kind` for WARMUP + `steps` steps; its median ms/step and last loss."""
    F = t.nn.functional
    t.manual_seed(0)
    model = build(t, kind)
    opt = t.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    rng = np.random.default_rng(0)
    times = []
    for _ in range(WARMUP + steps):
        rows = rng.integers(0, len(xs), CONFIG["batch"])
        start = time.perf_counter()
        x, y = t.from_numpy(xs[rows]), t.from_numpy(ys[rows])
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), ignore_index=-1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return {"ms": 1e3 * statistics.median(times[WARMUP:]), "loss": float(loss.item())}


def child(framework: str, threads: int, steps: int, words: str | None) -> None:
    """One process: every model in one framework; prints one JSON line."""
    if framework == "torch":
        import torch as t

        t.set_num_threads(threads)
    else:
        import tinyformer as t
    lines = Path(words).read_text().split() if words else make_words()
    xs, ys = encode([w.lower() for w in lines if w.isalpha()], CONFIG["block_size"])
    print(json.dumps({m: train(t, m, xs, ys, steps) for m in MODELS}), flush=True)


def run_side(side: str, steps: int, words: str | None) -> dict:
    framework, _, threads = side.partition("/")
    cmd = [sys.executable, "-m", "benchmarks.small_models", "--child", framework,
           "--threads", threads or "0", "--steps", str(steps)]  # fmt: skip
    if words:
        cmd += ["--words", words]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{side} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed steps per model (60)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each process (2)")
    parser.add_argument("--words", default=None, help="a file of words (default: generated)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench-results/small_models.json")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.threads, args.steps, args.words)
        return 0
    from benchmarks.inprocess_vs_cli import _cpu_model
    from tinyformer.bench import machine, print_table
    from tinyformer.fileio import save_json

    sides = ["tinyformer", "torch/1", "torch/2"]
    runs: dict[str, list[dict]] = {s: [] for s in sides}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            runs[side].append(run_side(side, args.steps, args.words))
            loads.append(os.getloadavg()[0])
            got = ", ".join(f"{m} {runs[side][-1][m]['ms']:.2f}" for m in MODELS)
            print(f"round {r + 1}, {side}: {got}", flush=True)

    def ms(side: str, model: str) -> float:
        return statistics.median(run[model]["ms"] for run in runs[side])

    rows = []
    for m in MODELS:
        best = min(("torch/1", "torch/2"), key=lambda s: ms(s, m))
        rows.append({
            "model": m, "tinyformer_ms": round(ms("tinyformer", m), 2),
            "torch_1t_ms": round(ms("torch/1", m), 2), "torch_2t_ms": round(ms("torch/2", m), 2),
            "ratio": round(ms("tinyformer", m) / ms(best, m), 2),
            "tinyformer_each": [round(run[m]["ms"], 2) for run in runs["tinyformer"]],
            "loss_tf": round(runs["tinyformer"][-1][m]["loss"], 3),
            "loss_torch": round(runs[best][-1][m]["loss"], 3),
        })  # fmt: skip
    cpu = _cpu_model()
    title = (f"makemore's small models, median ms/step over {args.rounds} rounds of "
             f"{args.steps} steps; ratio against PyTorch's faster thread count ({cpu}, "
             f"{os.cpu_count()} CPUs)")  # fmt: skip
    print_table(title, rows, ["model", "tinyformer_ms", "torch_1t_ms", "torch_2t_ms", "ratio",
                              "tinyformer_each", "loss_tf", "loss_torch"])  # fmt: skip
    import torch

    save_json(args.json, {"machine": {**machine(), "cpu": cpu, "torch": torch.__version__},
                          "config": CONFIG, "steps": args.steps, "load_average": loads,
                          "rows": rows, "runs": runs})  # fmt: skip
    print(f"\n{args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
