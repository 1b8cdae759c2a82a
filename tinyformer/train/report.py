"""What a training run leaves for people to look at: its peak memory and a loss-curve PNG."""

from __future__ import annotations

import resource
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.fileio import save_figure

__all__ = ["peak_rss_mib", "plot_losses"]


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (MiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def plot_losses(
    log: dict[str, Any], path: Path, title: str, ylabel: str = "cross-entropy (nats/token)"
) -> None:
    """Training loss per iteration (and its running mean), evaluated train/val losses, and the
    learning rate on a second axis."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    steps, losses = np.arange(1, len(log["loss"]) + 1), np.asarray(log["loss"])
    if len(losses):
        ax.plot(steps, losses, color="tab:blue", alpha=0.25, lw=0.8, label="train (batch)")
        window = max(1, min(50, len(losses) // 10))
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1 :], smooth, color="tab:blue", lw=1.5, label="train (mean)")
    for split, color in (("train", "tab:green"), ("val", "tab:red"), ("test", "tab:purple")):
        points = [(e["iter"], e[split]) for e in log["evals"] if split in e]
        if points:
            ax.plot(*zip(*points), "o-", color=color, ms=4, label=f"{split} (eval)")
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing drawn yet at a run's first checkpoint
        ax.legend(loc="upper right")
    if log["lr"]:
        lr_ax = ax.twinx()
        lr_ax.plot(steps, log["lr"], color="gray", lw=0.8, ls="--")
        lr_ax.set_ylabel("learning rate", color="gray")
    fig.tight_layout()
    save_figure(path, fig)
