"""The baby GPT's training step with its forward and backward captured as a CUDA graph
(`tinyformer.cuda.graphs`), beside the same step eager and beside PyTorch, eager and under
`torch.compile(mode="reduce-overhead")` (PyTorch's CUDA graphs), on one GPU in one run:

    python benchmarks/graphs_vs_torch.py                           # on cuda
    python benchmarks/graphs_vs_torch.py --device fake --iters 2   # CI: a toy width, emulated

Every row runs the same step: zero the gradients, forward, backward, clip the gradient norm
to 1, AdamW. In the graphed rows (tinyformer's graph, PyTorch's reduce-overhead) the first
three are the graph and clipping and AdamW run eagerly after it, as PyTorch's compiled
module leaves its optimizer. ms/iter: `--iters` steps after `--warmup`, one sync at each end
(no read inside the loop). Losses: the last step's, on the same batches from the same
initialisation, so that a graph that replays the wrong work shows as a loss apart from eager.

On the fake device the model is tiny and the CUDA kernels run on the CPU emulator: the figures
mean nothing, the code path (capture's checks included) is what CI runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BABY = dict(vocab=65, n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12)
TOY = dict(vocab=65, n_layer=1, n_head=2, n_embd=16, block_size=8, batch_size=2)


def _batches(c: dict, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    data = np.random.default_rng(0).integers(
        0, c["vocab"], (n, c["batch_size"], c["block_size"] + 1)
    )
    return [(d[:, :-1], d[:, 1:]) for d in data]


def _sync(device: str) -> None:
    if device == "cuda":
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def tinyformer_row(mode: str, c: dict, device: str, batches: list, warmup: int) -> dict:
    """One row: the step eager, or its forward and backward replayed from a graph."""
    import tinyformer as tf
    from tinyformer.cuda import graphs
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_

    tf.manual_seed(0)
    config = GPTConfig(vocab_size=c["vocab"], block_size=c["block_size"], n_layer=c["n_layer"],
                       n_head=c["n_head"], n_embd=c["n_embd"])  # fmt: skip
    model = GPT(config).to(device)
    optimizer = AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    x, y = (tf.Tensor(a, device=device) for a in batches[0])  # the static inputs

    def forward_backward(x, y):
        model.zero_grad()
        _, loss = model(x, y)
        loss.backward()
        return loss

    graph = None
    row: dict[str, Any] = {"framework": "tinyformer", "mode": mode}
    try:
        if mode == "graph":
            start = time.perf_counter()
            runs = 2 if device == "cuda" else 1  # eager runs before the capture
            graph = graphs.capture(forward_backward, x, y, state=model, warmup=runs)
            row["capture_s"] = round(time.perf_counter() - start, 2)
        for i, (xb, yb) in enumerate(batches):
            if i == warmup:
                _sync(device)
                start = time.perf_counter()
            if graph is not None:
                loss = graph.replay(xb, yb)
            else:
                x.data[...] = tf.Tensor(xb, device=device).data
                y.data[...] = tf.Tensor(yb, device=device).data
                loss = forward_backward(x, y)
            clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        _sync(device)
        row["ms_per_iter"] = 1e3 * (time.perf_counter() - start) / (len(batches) - warmup)
        row["loss"] = float(loss.data)
    except Exception as e:  # a refusal or a capture failure is a finding: report it
        row["error"] = f"{type(e).__name__}: {e}"[:600]
    return row


def torch_rows(c: dict, warmup: int, iters: int) -> list[dict[str, Any]]:
    import torch
    from gpt_vs_torch import torch_gpt

    batches = [(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda())
               for x, y in _batches(c, warmup + iters)]  # fmt: skip
    rows = []
    for mode in ("eager", "reduce-overhead"):
        row: dict[str, Any] = {"framework": "torch", "mode": mode}
        try:
            torch.manual_seed(0)
            model = torch_gpt(c["vocab"], c["n_layer"], c["n_head"], c["n_embd"],
                              c["block_size"]).cuda()  # fmt: skip
            run = torch.compile(model, mode="reduce-overhead") if mode != "eager" else model
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
            start = time.perf_counter()
            for i, (x, y) in enumerate(batches):
                if i == warmup:
                    torch.cuda.synchronize()
                    row["first_steps_s"] = round(time.perf_counter() - start, 2)  # compiles
                    start = time.perf_counter()
                if mode != "eager":  # a new step: the graph may overwrite the last outputs
                    torch.compiler.cudagraph_mark_step_begin()
                optimizer.zero_grad(set_to_none=True)
                loss = run(x, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            torch.cuda.synchronize()
            row["ms_per_iter"] = 1e3 * (time.perf_counter() - start) / iters
            row["loss"] = float(loss)
        except Exception as e:  # no triton, no compiler: say so, keep the other rows
            row["error"] = f"{type(e).__name__}: {e}"[:600]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or fake")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps (default 20)")
    parser.add_argument("--iters", type=int, default=100, help="timed steps")
    default_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "bench-results"
    parser.add_argument("--out", default=str(default_dir / "graphs_vs_torch.json"))
    args = parser.parse_args()
    on_gpu = args.device == "cuda"
    config = BABY if on_gpu else TOY
    warmup = args.warmup if args.warmup is not None else (20 if on_gpu else 1)
    batches = _batches(config, warmup + args.iters)
    rows = [
        tinyformer_row(mode, config, args.device, batches, warmup) for mode in ("eager", "graph")
    ]
    if on_gpu:
        rows += torch_rows(config, warmup, args.iters)
    name = args.device
    if on_gpu:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"baby GPT step on {name}, {args.iters} steps after {warmup}: "
          "zero_grad + forward + backward (graphed where said) + clip + AdamW")  # fmt: skip
    print(f"{'framework':12s} {'mode':16s} {'ms/iter':>8s} {'loss':>8s}")
    for r in rows:
        if "error" in r:
            print(f"{r['framework']:12s} {r['mode']:16s} failed: {r['error']}")
        else:
            print(f"{r['framework']:12s} {r['mode']:16s} {r['ms_per_iter']:8.2f} {r['loss']:8.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": name, "config": config, "rows": rows}, indent=2))
    print(out)


if __name__ == "__main__":
    main()
