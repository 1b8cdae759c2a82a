"""The closing report of `tinyformer train xlm`: a table, results.json and compare.png."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.fileio import save_figure, save_json

__all__ = ["report"]

RUNS = (("tlm", "MLM + TLM", "tab:blue"), ("mlm", "MLM only", "tab:orange"),
        ("scratch", "random weights", "tab:gray"))  # fmt: skip


def report(cfg: Any, logs: dict[str, Any]) -> dict[str, Any]:
    """Print the pretrained encoders' alignment and the classifiers' test accuracy in A and
    zero-shot in B (the mean over the fine-tuning runs, and each run); write results.json and
    compare.png."""
    out = Path(cfg.out_dir)
    pre = {name: logs[f"pretrain-{name}"]["evals"][-1] for name in ("tlm", "mlm")}
    for name, label, _ in RUNS[:2]:
        e = pre[name]
        print(f"pretraining {label}: masked-token accuracy {e['mlm_acc']:.1%} on sentences, "
              f"{e['tlm_acc']:.1%} on translation pairs; translation retrieval "
              f"{e['retrieval']:.1%} (chance 0.1%)")  # fmt: skip
    finals = {name: [log["evals"][-1] for log in logs[name]] for name, _, _ in RUNS}
    rows = {
        name: {
            "acc_a": float(np.mean([e["acc_a"] for e in evals])),
            "acc_b": float(np.mean([e["acc_b"] for e in evals])),
            "runs": [{"acc_a": e["acc_a"], "acc_b": e["acc_b"]} for e in evals],
        }
        for name, evals in finals.items()
    }
    print(f"fine-tuned in A for {cfg.finetune_iters} steps, mean of {cfg.finetune_seeds} runs, "
          f"{cfg.test_pairs} test pairs (chance 33%):")  # fmt: skip
    print(f"  {'pretraining':<16} {'accuracy in A':>14} {'zero-shot in B':>15}  B per run")
    for name, label, _ in RUNS:
        row = rows[name]
        each = " ".join(f"{r['acc_b']:.1%}" for r in row["runs"])
        print(f"  {label:<16} {row['acc_a']:>14.1%} {row['acc_b']:>15.1%}  {each}")
    results = {"config": dataclasses.asdict(cfg), "pretrain": pre, "finetune": rows}
    save_json(out / "results.json", results)
    _plot(logs, out / "compare.png")
    print(f"{out / 'compare.png'}, {out / 'results.json'}")
    return results


def _plot(logs: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4))
    ax_r, ax_a, ax_b = fig.subplots(1, 3)
    for name, label, color in RUNS[:2]:
        evals = logs[f"pretrain-{name}"]["evals"]
        ax_r.plot([e["iter"] for e in evals], [e["retrieval"] for e in evals], color=color,
                  label=label, marker="o")  # fmt: skip
    ax_r.axhline(1 / 1000, color="gray", linestyle=":", label="chance")
    ax_r.set(xlabel="pretraining step", ylabel="top-1 translation retrieval",
             title="alignment of A and B", ylim=(0, 1))  # fmt: skip
    for name, label, color in RUNS:
        for k, log in enumerate(logs[name]):
            steps = [e["iter"] for e in log["evals"]]
            mark = {"color": color, "marker": "o", "label": None if k else label}
            ax_a.plot(steps, [e["acc_a"] for e in log["evals"]], **mark)
            ax_b.plot(steps, [e["acc_b"] for e in log["evals"]], **mark)
    for ax, title in ((ax_a, "language A (fine-tuned in)"), (ax_b, "language B (zero-shot)")):
        ax.axhline(1 / 3, color="gray", linestyle=":", label="chance")
        ax.set(xlabel="fine-tuning step", ylabel="test accuracy", title=title, ylim=(0, 1))
    for ax in (ax_r, ax_a, ax_b):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
