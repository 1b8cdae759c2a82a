"""What `tinyformer train rlhf` leaves to look at: ppo.png (reward-model score, KL and the
labeler's true score per PPO iteration), and at the end a table of every policy, measured on
held-out prompts, in results.json and printed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.fileio import save_figure, save_json

__all__ = ["format_table", "plot_ppo", "report"]


def plot_ppo(log: dict[str, Any], path: Path, kl_coef: float) -> None:
    """Three panels over PPO iterations: what PPO maximises (the reward model's score), what
    holds it back (KL from the SFT policy) and what we wanted (the labeler's score)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.4))
    axes = fig.subplots(1, 3)
    steps = np.arange(1, len(log["reward"]) + 1)
    panels = (("reward", "reward model score", "tab:blue"),
              ("kl", "KL from SFT (nats / completion)", "tab:red"),
              ("score", "labeler's true score", "tab:green"))  # fmt: skip
    for ax, (key, label, color) in zip(axes, panels):
        ax.plot(steps, log[key], color=color, lw=1.5)
        ax.set_xlabel("PPO iteration")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    fig.suptitle(f"PPO with KL coefficient {kl_coef:g}")
    fig.tight_layout()
    save_figure(path, fig)


def format_table(rows: dict[str, dict[str, Any]]) -> str:
    """Markdown: policy | labeler score | KL from SFT | minutes."""
    lines = ["| policy | labeler score | KL from SFT (nats) | minutes |", "|---|---|---|---|"]
    for name, row in rows.items():
        minutes = f"{row['minutes']:.1f}" if "minutes" in row else "-"
        lines.append(f"| {name} | {row['score']:.3f} | {row['kl']:.2f} | {minutes} |")
    return "\n".join(lines)


def report(cfg: Any, results: dict[str, Any]) -> None:
    out = Path(cfg.out_dir)
    table = format_table(results["table"])
    save_json(out / "results.json", {"config": dataclasses.asdict(cfg), **results})
    print(f"\nheld-out prompts: {cfg.eval_prompts}, completions of {cfg.completion_len} "
          f"characters\n{table}")  # fmt: skip
    for name, row in results["table"].items():
        print(f"\n{name} samples (prompt|completion):")
        for sample in row["samples"][:3]:
            print("  " + repr(sample))
    print(f"\n{out / 'results.json'}")
