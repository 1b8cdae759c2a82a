"""The cross-attention alignment plot of `tinyformer train seq2seq`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinyformer import backend
from tinyformer.autograd import no_grad
from tinyformer.data.dates import DateTask
from tinyformer.fileio import save_figure
from tinyformer.models.seq2seq import Transformer

__all__ = [
    "FORMATS", "cross_attention", "heldout_sources", "plot_alignment", "plot_alignment_grid",
]  # fmt: skip


@no_grad()
def cross_attention(model: Transformer, src: np.ndarray, tgt_in: np.ndarray) -> np.ndarray:
    """Cross-attention weights of the last decoder layer, averaged over heads:
    (B, T, S), row t = where output position t looked in the source."""
    memory, src_pad = model.encode(src)
    _, weights = model.decode(tgt_in, memory, src_pad, need_weights=True)
    return backend.to_host(weights[-1].data).mean(axis=1)  # (B, nh, T, S) -> (B, T, S)


FORMATS = ("long", "weekday", "dotted", "ordinal")  # one held-out date, written four ways


def heldout_sources(task: DateTask, formats: tuple = FORMATS) -> tuple[np.ndarray, list[str]]:
    """One held-out date in each of `formats`: source ids (B, S) and the source strings."""
    day = task.test_days[:1].repeat(len(formats))
    src, _, _, sources, _ = task.examples(day, list(formats))
    return src, sources


def plot_alignment_grid(
    weights: np.ndarray, sources: list[str], outputs: np.ndarray, title: str, path: Path
) -> None:
    """One heat map per source: the weights (T, S) of each output character (rows) over the
    source characters (columns)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(sources), 3.6))
    axes = fig.subplots(1, len(sources), squeeze=False)[0]
    for ax, w, s, o in zip(axes, weights, sources, outputs, strict=True):
        rows = [*DateTask.TARGET.decode(o), "[EOS]"][: w.shape[0]]  # the last row chose EOS
        # one scale for every map (0 to 1: each row is a softmax), with its colour bar
        shown = ax.imshow(w[: len(rows), : len(s)], cmap="viridis", aspect="auto", vmin=0, vmax=1)
        ax.set_xticks(range(len(s)), list(s), fontsize=7)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_title(repr(s), fontsize=9)
        ax.set_xlabel("source character")
    axes[0].set_ylabel("output character")
    fig.colorbar(shown, ax=axes[-1], fraction=0.05, pad=0.02, label="attention weight")
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(path, fig)


def plot_alignment(model: Transformer, task: DateTask, path: Path) -> None:
    """Cross-attention of the last decoder layer for a held-out date in each of `FORMATS`,
    decoded by the model itself (greedy)."""
    src, sources = heldout_sources(task)
    out = model.greedy(src, DateTask.MAX_TARGET - 1)  # (B, T) the model's own output
    tgt_in = np.concatenate([np.ones((len(src), 1), np.int64), out[:, :-1]], axis=1)
    weights = cross_attention(model, src, tgt_in)  # (B, T, S)
    title = "cross-attention (last decoder layer, mean over heads)"
    plot_alignment_grid(weights, sources, out, title, path)
