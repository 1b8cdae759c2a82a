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
"""

from __future__ import annotations

import argparse
import json
import re
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


def check_nanogpt(path: Path, steps: int) -> dict:
    import tinyformer as tf
    from tinyformer.data.text import load_text

    model_py = load_ported(path, "nanogpt_model")
    text = load_text("pydoc")
    chars = sorted(set(text))
    data = np.array([chars.index(c) for c in text], np.int64)
    config = model_py.GPTConfig(
        block_size=32, vocab_size=len(chars), n_layer=2, n_head=2, n_embd=48, dropout=0.0
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
    return {"model": "nanoGPT GPT", "params": model.get_num_params(), "losses": losses,
            "ms": times, "result": f"sample {sample[1:]!r}"}  # fmt: skip


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nanogpt", type=Path, help="nanoGPT's model.py")
    parser.add_argument("--vit", type=Path, help="vit-pytorch's vit_pytorch/vit.py")
    parser.add_argument("--simple-vit", type=Path, help="vit-pytorch's vit_pytorch/simple_vit.py")
    parser.add_argument("--steps", type=int, default=150, help="training steps (default 150)")
    parser.add_argument("--json", type=Path, default=Path("bench-results/port_check.json"))
    args = parser.parse_args()
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
    args.json.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.json.with_suffix(".tmp")
    tmp.write_text(json.dumps({"steps": args.steps, "rows": rows}, indent=1))
    tmp.replace(args.json)
    print(f"\n{args.json}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
