"""PyTorch code that nobody here wrote, run on tinyformer after changing only its import lines.

Give it the files from your own clones (nothing is downloaded):

    python benchmarks/port_check.py --nanogpt nanoGPT/model.py \\
        --vit vit-pytorch/vit_pytorch/vit.py --simple-vit vit-pytorch/vit_pytorch/simple_vit.py

Each file's import lines are rewritten (`import torch` -> `import tinyformer as torch`,
`from torch import nn` -> `from tinyformer import nn`, `einops.layers.torch` ->
`tinyformer.nn`), and nothing else; the rewritten lines are printed. Then the model is built
small, trained for `--steps` AdamW steps on CPU (nanoGPT: characters of the embedded pydoc text,
through its own `configure_optimizers`; the ViTs: the embedded 8x8 digits) and used (nanoGPT:
`generate` with top-k, whose `logits[logits < v[:, [-1]]] = -inf` is an in-place write;
the ViTs: test accuracy). A table, and JSON in bench-results/port_check.json.

With `--torch-rounds N`, nanoGPT's file also runs unmodified on PyTorch (CPU, its own thread
defaults), and both frameworks' training steps are timed in fresh plain processes (no process
settings in their environment, as a script starts), taking turns for N rounds; the table shows
the median over rounds of each process's median ms/step:

    python benchmarks/port_check.py --nanogpt nanoGPT/model.py --torch-rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

# (pattern on one import line, replacement): the only edits made to the ported files.
IMPORTS = [
    (r"^import torch$", "import tinyformer as torch"),
    (r"^import torch\.nn as nn$", "import tinyformer.nn as nn"),
    (r"^from torch\.nn import functional as F$", "from tinyformer.nn import functional as F"),
    (r"^import torch\.nn\.functional as F$", "import tinyformer.nn.functional as F"),
    (r"^from torch import nn$", "from tinyformer import nn"),
    (r"^from torch\.nn import (.+)$", r"from tinyformer.nn import \1"),
    (r"^from einops\.layers\.torch import (.+)$", r"from tinyformer.nn import \1"),
]


def rewrite_imports(source: str) -> tuple[str, list[tuple[str, str]]]:
    """`source` with its torch import lines pointed at tinyformer, and the (old, new) pairs."""
    lines, changed = source.splitlines(), []
    for i, line in enumerate(lines):
        for pattern, replacement in IMPORTS:
            new = re.sub(pattern, replacement, line)
            if new != line:
                changed.append((line, new))
                lines[i] = new
                break
    return "\n".join(lines) + "\n", changed


def load_ported(path: Path, name: str) -> types.ModuleType:
    source, changed = rewrite_imports(path.read_text(encoding="utf-8"))
    for old, new in changed:
        print(f"  {path.name}: {old!r} -> {new!r}")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def check_nanogpt(path: Path, steps: int, framework: str = "tinyformer") -> dict:
    """nanoGPT's model trained for `steps` steps: on tinyformer through the rewritten imports,
    or, with framework "torch", the file as it is on PyTorch."""
    from tinyformer.data.text import load_text

    if framework == "torch":
        import torch as tf

        model_py = types.ModuleType("nanogpt_torch")
        model_py.__file__ = str(path)
        sys.modules[model_py.__name__] = model_py
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), model_py.__dict__)
    else:
        import tinyformer as tf

        model_py = load_ported(path, "nanogpt_model")
    text = load_text("pydoc")
    chars = sorted(set(text))
    data = np.array([chars.index(c) for c in text], np.int64)
    config = model_py.GPTConfig(
        block_size=32, vocab_size=len(chars), n_layer=3, n_head=2, n_embd=48, dropout=0.0
    )
    tf.manual_seed(0)
    model = model_py.GPT(config)
    optimizer = model.configure_optimizers(0.1, 3e-3, (0.9, 0.95), "cpu")
    rng = np.random.default_rng(0)
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        ix = rng.integers(0, len(data) - config.block_size - 1, 16)
        x = tf.tensor(np.stack([data[i : i + config.block_size] for i in ix]))
        y = tf.tensor(np.stack([data[i + 1 : i + 1 + config.block_size] for i in ix]))
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - start) * 1e3)
    model.eval()
    out = model.generate(tf.zeros((1, 1), dtype=tf.long), 40, temperature=0.8, top_k=5)
    sample = "".join(chars[i] for i in out[0].tolist())
    model.crop_block_size(16)
    return {"model": f"nanoGPT GPT on {framework}", "params": model.get_num_params(),
            "losses": losses, "ms": times, "result": f"sample {sample[1:]!r}"}  # fmt: skip


def check_vit(path: Path, steps: int, cls_name: str, **extra) -> dict:
    import tinyformer as tf
    from tinyformer.data.images import load_digits
    from tinyformer.optim import AdamW

    vit_py = load_ported(path, f"ported_{path.stem}")
    images, labels = load_digits()
    x = (images.reshape(-1, 1, 8, 8) / 16.0).astype(np.float32)
    train, test = slice(0, 1500), slice(1500, None)
    tf.manual_seed(0)
    model = getattr(vit_py, cls_name)(
        image_size=8, patch_size=2, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64,
        channels=1, dim_head=16, **extra,
    )  # fmt: skip
    optimizer = AdamW(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    losses, times = [], []
    for _ in range(steps):
        start = time.perf_counter()
        ix = rng.integers(train.start, train.stop, 64)
        loss = tf.nn.functional.cross_entropy(model(tf.tensor(x[ix])), labels[ix])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        times.append((time.perf_counter() - start) * 1e3)
    model.eval()
    with tf.no_grad():
        pred = model(tf.tensor(x[test])).numpy().argmax(-1)
    params = sum(p.numel() for p in model.parameters())
    accuracy = float((pred == labels[test]).mean())
    return {"model": f"vit-pytorch {cls_name}", "params": params, "losses": losses, "ms": times,
            "result": f"test accuracy {accuracy:.3f}"}  # fmt: skip


def _plain_env() -> dict[str, str]:
    """This environment without the process settings: a script as a user starts it."""
    from tinyformer.runtime import BLAS_THREAD_VARS, MALLOC_VARS, RUNTIME_ENV, THREADS_VAR

    drop = {*BLAS_THREAD_VARS, *MALLOC_VARS, *RUNTIME_ENV, THREADS_VAR, "GOMP_SPINCOUNT"}
    return {k: v for k, v in os.environ.items() if k not in drop | {"TINYFORMER_RESTARTED"}}


def compare_torch(path: Path, steps: int, rounds: int) -> list[dict]:
    """nanoGPT on tinyformer and on PyTorch, each round a fresh plain process of each, taking
    turns; per framework the median over rounds of each process's median ms/step (after the
    first fifth of its steps)."""
    per: dict[str, list[float]] = {"tinyformer": [], "torch": []}
    for r in range(rounds):
        for framework in list(per) if r % 2 == 0 else list(per)[::-1]:
            cmd = [sys.executable, __file__, "--child", framework, "--nanogpt", str(path),
                   "--steps", str(steps)]  # fmt: skip
            done = subprocess.run(cmd, env=_plain_env(), capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"{framework} run failed: {done.stderr.strip()[-2000:]}")
            ms = json.loads(done.stdout.strip().splitlines()[-1])["ms"]
            per[framework].append(statistics.median(ms[len(ms) // 5 :]))
            print(f"round {r + 1}: {framework}: {per[framework][-1]:.1f} ms/step", flush=True)
    torch_ms = statistics.median(per["torch"])
    return [{"framework": f, "ms_per_step": statistics.median(v),
             "x_torch": statistics.median(v) / torch_ms, "rounds": v}
            for f, v in per.items()]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nanogpt", type=Path, help="nanoGPT's model.py")
    parser.add_argument("--vit", type=Path, help="vit-pytorch's vit_pytorch/vit.py")
    parser.add_argument("--simple-vit", type=Path, help="vit-pytorch's vit_pytorch/simple_vit.py")
    parser.add_argument("--steps", type=int, default=150, help="training steps (default 150)")
    parser.add_argument(
        "--torch-rounds", type=int, default=0,
        help="also time nanoGPT against PyTorch in this many rounds of fresh processes",
    )  # fmt: skip
    parser.add_argument("--json", type=Path, default=Path("bench-results/port_check.json"))
    parser.add_argument("--child", choices=["tinyformer", "torch"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 1 or args.torch_rounds < 0:
        parser.error(f"--steps must be at least 1 and --torch-rounds at least 0, got "
                     f"{args.steps} and {args.torch_rounds}")  # fmt: skip
    if args.child:  # one timed run, its result as JSON on the last line
        print(json.dumps(check_nanogpt(args.nanogpt, args.steps, args.child)))
        return 0
    if args.torch_rounds and args.nanogpt is None:
        parser.error("--torch-rounds needs --nanogpt")
    jobs = [
        (args.nanogpt, lambda p: check_nanogpt(p, args.steps)),
        (args.vit, lambda p: check_vit(p, args.steps, "ViT")),
        (args.simple_vit, lambda p: check_vit(p, args.steps, "SimpleViT")),
    ]
    if not any(path for path, _ in jobs):
        parser.error("give at least one of --nanogpt, --vit, --simple-vit")
    rows = []
    for path, job in jobs:
        if path is None:
            continue
        if not path.is_file():
            parser.error(f"{path}: no such file")
        try:
            rows.append({"file": str(path), "status": "ok", **job(path)})
        except Exception as err:  # a port that fails is a row of the table, with its error
            rows.append({"file": str(path), "status": f"{type(err).__name__}: {err}"})
    print(f"\n{'file':<28} {'params':>8} {'loss first -> last':>20} {'ms/step':>8}  result")
    for r in rows:
        if r["status"] != "ok":
            print(f"{Path(r['file']).name:<28} FAILED: {r['status']}")
            continue
        first, last = np.mean(r["losses"][:10]), np.mean(r["losses"][-10:])
        print(f"{Path(r['file']).name:<28} {r['params']:>8,} {first:>9.3f} -> {last:<8.3f} "
              f"{np.median(r['ms']):>8.1f}  {r['result']}")  # fmt: skip
    versus = compare_torch(args.nanogpt, args.steps, args.torch_rounds) if args.torch_rounds else []
    if versus:
        print(f"\nnanoGPT model.py, plain processes, median over {args.torch_rounds} rounds "
              f"(load average now {os.getloadavg()[0]:.1f}):")  # fmt: skip
        for v in versus:
            rounds = ", ".join(f"{t:.1f}" for t in v["rounds"])
            print(f"  {v['framework']:<11} {v['ms_per_step']:>7.1f} ms/step  "
                  f"{v['x_torch']:>5.2f}x PyTorch  (rounds: {rounds})")  # fmt: skip
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_suffix(".tmp")
    record = {"steps": args.steps, "rows": rows, "versus_torch": versus}
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(args.json)
    print(f"\n{args.json}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
