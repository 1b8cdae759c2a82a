"""Data parallel baby GPT: tinyformer's DistributedDataParallel (over MPI) beside PyTorch's DDP
(gloo backend, CPU), on 1 and 2 ranks, with the same model, global batch and data. Prints a
table and writes JSON.

    pip install -e ".[mpi]"
    python benchmarks/ddp_vs_torch.py                  # 200 steps per configuration
    python benchmarks/ddp_vs_torch.py --iters 60 --out bench-results/ddp.json
    python benchmarks/ddp_vs_torch.py --ranks 2 --rounds 5 --iters 40   # a shared machine

Every configuration runs as its own `mpiexec -n R` job, with each rank's threads set to its
share of the cores (2 cores: 2 threads on 1 rank, 1 thread each on 2 ranks). The global batch
(12 sequences) is split evenly over the ranks; both frameworks all-reduce every gradient once
per step, so the bytes each rank sends per step are the same: 2 (N - 1) / N times the
gradients' bytes for a ring all-reduce. ms/step is the median after the first 10% of steps;
with `--rounds R` every configuration runs R times, interleaved (the frameworks' order
alternating), and the table gives the median of the R runs.

PyTorch (torch==2.13.0 CPU) is only a comparison here, never a dependency of tinyformer.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from gpt_vs_torch import RECIPE, batches, load_data, lr_at, torch_gpt

HERE = Path(__file__).resolve().parent


def _rank_world() -> tuple[int, int]:
    return int(os.environ.get("PMI_RANK", 0)), int(os.environ.get("PMI_SIZE", 1))


def _shard(a: np.ndarray, rank: int, world: int) -> np.ndarray:
    n = len(a) // world
    return a[rank * n : (rank + 1) * n]


def run_tinyformer(train: np.ndarray, vocab: int, iters: int) -> tuple[list[float], int]:
    import tinyformer as tf
    import tinyformer.distributed as dist
    from tinyformer.distributed.training import init_from_launcher
    from tinyformer.models.gpt import GPT, GPTConfig
    from tinyformer.optim import AdamW, clip_grad_norm_, weight_decay_groups

    init_from_launcher()
    if not dist.is_initialized():
        dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    r = RECIPE
    tf.manual_seed(0)
    gpt = GPT(GPTConfig(r["block_size"], vocab, r["n_layer"], r["n_head"], r["n_embd"]))
    model = dist.DistributedDataParallel(gpt)
    opt = AdamW(weight_decay_groups(gpt, r["weight_decay"]), lr=r["lr"], betas=r["betas"])
    times = []
    for it, (x, y) in enumerate(batches(train, iters, seed=1)):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, iters)
        loss = model(_shard(x, rank, world), _shard(y, rank, world))[1]
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(gpt.parameters(), r["grad_clip"])
        opt.step()
        times.append(time.perf_counter() - start)
    return times, sum(p.data.nbytes for p in gpt.parameters())


def run_torch(train: np.ndarray, vocab: int, iters: int) -> tuple[list[float], int]:
    import torch
    import torch.distributed as tdist

    rank, world = _rank_world()
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    tdist.init_process_group(
        "gloo", init_method=os.environ["DDP_BENCH_INIT"], rank=rank, world_size=world
    )
    torch.manual_seed(0)
    r = RECIPE
    gpt = torch_gpt(vocab, r["n_layer"], r["n_head"], r["n_embd"], r["block_size"])
    model = torch.nn.parallel.DistributedDataParallel(gpt)
    params = list(gpt.parameters())
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=r["lr"], betas=r["betas"])
    times = []
    for it, (x, y) in enumerate(batches(train, iters, seed=1)):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, iters)
        xs, ys = (torch.from_numpy(_shard(a, rank, world)) for a in (x, y))
        loss = model(xs, ys)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, r["grad_clip"])
        opt.step()
        times.append(time.perf_counter() - start)
    tdist.destroy_process_group()
    return times, sum(p.numel() * p.element_size() for p in params)


def child(framework: str, data: str, iters: int) -> None:
    train, _, vocab = load_data(data)
    run = run_tinyformer if framework == "tinyformer" else run_torch
    times, grad_bytes = run(train, vocab, iters)
    rank, world = _rank_world()
    if rank == 0:
        ms = np.array(times[len(times) // 10 :]) * 1e3
        sent = 2 * (world - 1) / world * grad_bytes
        print(json.dumps({
            "framework": framework, "ranks": world, "iters": iters,
            "ms_per_step": float(np.median(ms)), "gradient_bytes": grad_bytes,
            "bytes_sent_per_rank_per_step": sent,
        }))  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(framework: str, ranks: int) -> dict[str, str]:
    """Each rank's share of the cores. tinyformer's ranks get what `tinyformer launch` gives
    them: Numba's threads, and the start-up settings of `tinyformer train` (RUNTIME_ENV), with
    no BLAS thread variable, which the runtime would take as the user's choice and so leave
    BLAS's own pool running beside Numba's. PyTorch's threads are its OpenMP's."""
    from tinyformer.distributed.launch import threads_per_rank
    from tinyformer.runtime import RUNTIME_ENV

    threads = str(threads_per_rank(ranks))
    env = {**os.environ, "DDP_BENCH_INIT": f"tcp://127.0.0.1:{_free_port()}"}
    if framework == "tinyformer":
        return {**RUNTIME_ENV, **env, "NUMBA_NUM_THREADS": threads}
    return {**env, "OMP_NUM_THREADS": threads}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="pydoc", help="corpus name or path (default: pydoc)")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--ranks", default="1,2", help="rank counts to run (default: 1,2)")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="run every configuration this many times, interleaved; report the median",
    )  # fmt: skip
    parser.add_argument("--out", default="bench-results/ddp_vs_torch.json")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.data, args.iters)
    from tinyformer.distributed.launch import find_mpiexec

    counts = sorted({int(n) for n in args.ranks.split(",")})
    runs: dict[tuple[str, int], list[dict]] = {}
    loads = [os.getloadavg()[0]]
    for round_ in range(args.rounds):
        # Alternate which framework goes first, so that a machine getting busier or quieter
        # during a round does not favour one of them.
        order = ("tinyformer", "torch") if round_ % 2 == 0 else ("torch", "tinyformer")
        for ranks in counts:
            for framework in order:
                cmd = [
                    find_mpiexec(), "-n", str(ranks), sys.executable, __file__,
                    "--child", framework, "--data", args.data, "--iters", str(args.iters),
                ]  # fmt: skip
                done = subprocess.run(
                    cmd, capture_output=True, text=True, env=_env(framework, ranks), cwd=HERE
                )
                if done.returncode:
                    raise SystemExit(f"{framework} on {ranks} ranks failed:\n{done.stderr[-3000:]}")
                row = json.loads(done.stdout.strip().splitlines()[-1])
                runs.setdefault((framework, ranks), []).append(row)
                print(f"round {round_ + 1}: {framework:10s} {ranks} rank(s): "
                      f"{row['ms_per_step']:.1f} ms/step", flush=True)  # fmt: skip
        loads.append(os.getloadavg()[0])
    rows = [
        {**rs[0], "ms_per_step": float(np.median([r["ms_per_step"] for r in rs])),
         "rounds": [r["ms_per_step"] for r in rs]}
        for rs in runs.values()
    ]  # fmt: skip
    by = {(r["framework"], r["ranks"]): r for r in rows}
    print(f"\nmedian of {args.rounds} round(s) of {args.iters} steps; load average "
          f"{min(loads):.1f}-{max(loads):.1f}")  # fmt: skip
    head = "".join(f" ms/step, {n} rank{'s' if n > 1 else ''} |" for n in counts)
    print(f"| framework |{head}\n|---|" + "---|" * len(counts))
    for fw in ("tinyformer", "torch"):
        print(f"| {fw} |" + "".join(f" {by[(fw, n)]['ms_per_step']:.1f} |" for n in counts))
    if max(counts) > 1:
        n = max(counts)
        ratio = by[("tinyformer", n)]["ms_per_step"] / by[("torch", n)]["ms_per_step"]
        sent = by[("tinyformer", n)]["bytes_sent_per_rank_per_step"] / 1e6
        print(
            f"\n{n} ranks: tinyformer / torch = {ratio:.2f}; {sent:.2f} MB sent per rank per step"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(
        {"machine": os.uname().machine, "load_average": loads, "rows": rows}, indent=2
    ))  # fmt: skip
    os.replace(tmp, out)
    print(f"\n{out}")


if __name__ == "__main__":
    main()
