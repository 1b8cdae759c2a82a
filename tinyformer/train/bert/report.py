"""The closing report of `tinyformer train bert`: a table, results.json and compare.png."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tinyformer.fileio import save_figure, save_json

__all__ = ["report"]


def _final(log: dict[str, Any]) -> dict[str, float]:
    return log["evals"][-1]


def report(cfg: Any, logs: dict[str, Any]) -> dict[str, Any]:
    """Print the pretrained-vs-scratch table (and, after --nsp pretraining, the held-out NSP
    accuracy); write results.json and compare.png (with a third panel for NSP)."""
    out = Path(cfg.out_dir)
    pre = _final(logs["pretrain"])
    rows = {name: _final(logs[name]) for name in ("pretrained", "scratch")}
    best = {name: max(e["test_acc"] for e in logs[name]["evals"]) for name in rows}
    print(f"\nmasked LM after {cfg.pretrain_iters} steps: held-out loss {pre['val']:.3f}, "
          f"masked-token accuracy {pre['val_acc']:.1%}")  # fmt: skip
    if "nsp_val_acc" in pre:
        print(f"next-sentence prediction: held-out pairs {pre['nsp_val_acc']:.1%} (loss "
              f"{pre['nsp_val']:.3f}), training pairs {pre['nsp_train_acc']:.1%}; chance "
              f"50%")  # fmt: skip
    print(f"fine-tuning, {cfg.finetune_iters} steps each, test set of {cfg.held_out} sentences:")
    print(f"  {'start':<22} {'test accuracy':>14} {'best':>8} {'test loss':>10}")
    for name, label in (("pretrained", "pretrained encoder"), ("scratch", "random weights")):
        e = rows[name]
        print(f"  {label:<22} {e['test_acc']:>14.1%} {best[name]:>8.1%} {e['test']:>10.3f}")
    gain = rows["pretrained"]["test_acc"] - rows["scratch"]["test_acc"]
    print(
        f"  pretraining adds {gain * 100:+.1f} points of accuracy for the same fine-tuning budget"
    )
    results = {
        "config": dataclasses.asdict(cfg),
        "pretrain": pre,
        "finetune": {name: {**rows[name], "best_test_acc": best[name]} for name in rows},
        "gain": gain,
    }
    save_json(out / "results.json", results)
    _plot(logs, out / "compare.png", nsp="nsp_val_acc" in pre)
    print(f"{out / 'compare.png'}, {out / 'results.json'}")
    return results


def _plot(logs: dict[str, Any], path: Path, nsp: bool = False) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15 if nsp else 10, 4))
    axes = fig.subplots(1, 3 if nsp else 2)
    ax_loss, ax_acc = axes[:2]
    for name, color in (("pretrained", "tab:blue"), ("scratch", "tab:orange")):
        evals = logs[name]["evals"]
        steps = [e["iter"] for e in evals]
        ax_loss.plot(steps, [e["test"] for e in evals], color=color, label=name)
        ax_acc.plot(steps, [e["test_acc"] for e in evals], color=color, label=name, marker="o")
    ax_acc.axhline(0.5, color="gray", linestyle=":", label="chance")
    ax_loss.set(xlabel="fine-tuning step", ylabel="test loss", title="test loss")
    ax_acc.set(
        xlabel="fine-tuning step", ylabel="test accuracy", title="written order or shuffled?"
    )
    if nsp:  # pretraining's second task, on held-out pairs
        evals = logs["pretrain"]["evals"]
        steps = [e["iter"] for e in evals]
        for split, color, label in (("val", "tab:green", "held-out pairs"),
                                    ("train", "tab:gray", "training pairs")):  # fmt: skip
            axes[2].plot(steps, [e[f"nsp_{split}_acc"] for e in evals], marker="o", color=color,
                         label=label)  # fmt: skip
        axes[2].axhline(0.5, color="gray", linestyle=":", label="chance")
        axes[2].set(xlabel="pretraining step", ylabel="NSP accuracy",
                    title="is B the sentence after A?")  # fmt: skip
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
