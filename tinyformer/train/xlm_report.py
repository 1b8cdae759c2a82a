"""The closing report of `tinyformer train xlm`: a table, results.json and compare.png."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tinyformer.fileio import save_figure, save_json

__all__ = ["report"]

RUNS = (("tlm", "MLM + TLM", "tab:blue"), ("mlm", "MLM only", "tab:orange"),
        ("scratch", "random weights", "tab:gray"))  # fmt: skip


def report(cfg: Any, logs: dict[str, Any]) -> dict[str, Any]:
    """Print the three runs' test accuracy in A and zero-shot in B; write results.json and
    compare.png."""
    out = Path(cfg.out_dir)
    pre = {name: logs[f"pretrain-{name}"]["evals"][-1] for name in ("tlm", "mlm")}
    for name, label, _ in RUNS[:2]:
        e = pre[name]
        print(f"pretraining {label}: masked-token accuracy {e['mlm_acc']:.1%} on sentences, "
              f"{e['tlm_acc']:.1%} on translation pairs")  # fmt: skip
    rows = {name: logs[name]["evals"][-1] for name, _, _ in RUNS}
    print(f"fine-tuned in A for {cfg.finetune_iters} steps, {cfg.test_pairs} test pairs "
          f"(chance 33%):")  # fmt: skip
    print(f"  {'pretraining':<16} {'accuracy in A':>14} {'zero-shot in B':>15}")
    for name, label, _ in RUNS:
        print(f"  {label:<16} {rows[name]['acc_a']:>14.1%} {rows[name]['acc_b']:>15.1%}")
    results = {
        "config": dataclasses.asdict(cfg),
        "pretrain": pre,
        "finetune": {
            name: {**rows[name], "best_acc_b": max(e["acc_b"] for e in logs[name]["evals"])}
            for name in rows
        },
    }
    save_json(out / "results.json", results)
    _plot(logs, out / "compare.png")
    print(f"{out / 'compare.png'}, {out / 'results.json'}")
    return results


def _plot(logs: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    ax_a, ax_b = fig.subplots(1, 2)
    for name, label, color in RUNS:
        evals = logs[name]["evals"]
        steps = [e["iter"] for e in evals]
        ax_a.plot(steps, [e["acc_a"] for e in evals], color=color, label=label, marker="o")
        ax_b.plot(steps, [e["acc_b"] for e in evals], color=color, label=label, marker="o")
    for ax, title in ((ax_a, "language A (fine-tuned in)"), (ax_b, "language B (zero-shot)")):
        ax.axhline(1 / 3, color="gray", linestyle=":", label="chance")
        ax.set(xlabel="fine-tuning step", ylabel="test accuracy", title=title, ylim=(0, 1))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
