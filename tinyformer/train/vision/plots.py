"""Pictures of trained image models, saved as PNG: a confusion matrix, segmentations beside
the ground truth, and for a ViT the patch grid, each head's [CLS]-to-patch attention and the
attention rollout."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tinyformer.data import SHAPE_CLASSES
from tinyformer.fileio import save_figure
from tinyformer.models.vit import ViT, attention_rollout

__all__ = ["plot_confusion", "plot_segmentations", "plot_vit"]


def _show(ax, image: np.ndarray) -> None:
    """(C, H, W) in [0, 1]: grey for one channel, RGB for three."""
    if image.shape[0] == 1:
        ax.imshow(image[0], cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(image.transpose(1, 2, 0).clip(0, 1))
    ax.set_xticks([])
    ax.set_yticks([])


def plot_confusion(
    targets: np.ndarray, predictions: np.ndarray, n_classes: int, path: Path
) -> None:
    from matplotlib.figure import Figure

    counts = np.zeros((n_classes, n_classes), np.int64)
    np.add.at(counts, (targets, predictions), 1)
    fig = Figure(figsize=(5.5, 5))
    ax = fig.subplots()
    ax.imshow(counts, cmap="Blues")
    for i in range(n_classes):
        for j in range(n_classes):
            if counts[i, j]:
                colour = "white" if counts[i, j] > counts.max() / 2 else "black"
                ax.text(j, i, counts[i, j], ha="center", va="center", fontsize=8, color=colour)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_xticks(range(n_classes))
    ax.set_yticks(range(n_classes))
    ax.set_title(f"confusion matrix (accuracy {(targets == predictions).mean():.1%})")
    fig.tight_layout()
    save_figure(path, fig)


def plot_segmentations(
    images: np.ndarray, masks: np.ndarray, predictions: np.ndarray, path: Path, rows: int = 4
) -> None:
    from matplotlib.figure import Figure

    rows = min(rows, len(images))
    fig = Figure(figsize=(7, 2.3 * rows))
    axes = fig.subplots(rows, 3, squeeze=False)
    k = len(SHAPE_CLASSES) - 1
    for r in range(rows):
        _show(axes[r, 0], images[r])
        for c, (grid, title) in enumerate(((masks[r], "truth"), (predictions[r], "prediction"))):
            axes[r, c + 1].imshow(grid, cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
            axes[r, c + 1].set_xticks([])
            axes[r, c + 1].set_yticks([])
            if r == 0:
                axes[r, c + 1].set_title(title)
    axes[0, 0].set_title("image")
    fig.suptitle(f"classes: {', '.join(f'{i} {n}' for i, n in enumerate(SHAPE_CLASSES[: k + 1]))}")
    fig.tight_layout()
    save_figure(path, fig)


def plot_vit(model: ViT, image: np.ndarray, folder: Path) -> list[Path]:
    """patches.png, attention.png (last block, each head), rollout.png for one image (C, H, W)."""
    from matplotlib.figure import Figure

    cfg = model.config
    p, side = cfg.patch_size, cfg.image_size // cfg.patch_size
    paths = [folder / "patches.png", folder / "attention.png", folder / "rollout.png"]

    fig = Figure(figsize=(0.6 * side + 1, 0.6 * side + 1))
    axes = fig.subplots(side, side, squeeze=False)
    for i in range(side):
        for j in range(side):
            _show(axes[i, j], image[:, i * p : (i + 1) * p, j * p : (j + 1) * p])
    fig.suptitle(f"{side * side} patches of {p}x{p} pixels: the ViT's tokens")
    save_figure(paths[0], fig)

    maps = model.attention_maps(image[None])  # each (1, nh, T, T)
    last = maps[-1][0, :, 0, 1:].reshape(cfg.n_head, side, side)  # [CLS] -> every patch
    fig = Figure(figsize=(2.2 * (cfg.n_head + 1), 2.6))
    axes = fig.subplots(1, cfg.n_head + 1)
    _show(axes[0], image)
    axes[0].set_title("image")
    top = float(last.max()) or 1.0  # one scale for every head, so that they compare
    for h in range(cfg.n_head):
        shown = axes[h + 1].imshow(last[h], cmap="viridis", vmin=0, vmax=top)
        axes[h + 1].set_title(f"head {h}")
        axes[h + 1].set_xticks([])
        axes[h + 1].set_yticks([])
    fig.colorbar(shown, ax=axes[-1], fraction=0.046, pad=0.04, label="attention weight")
    fig.suptitle("last block: attention of [CLS] to each patch")
    fig.tight_layout()
    save_figure(paths[1], fig)

    rollout = attention_rollout(maps)[0, 0, 1:].reshape(side, side)
    fig = Figure(figsize=(5, 2.6))
    axes = fig.subplots(1, 2)
    _show(axes[0], image)
    shown = axes[1].imshow(rollout, cmap="viridis", vmin=0)
    axes[1].set_xticks([])
    axes[1].set_yticks([])
    axes[1].set_title("attention rollout")
    fig.colorbar(shown, ax=axes[1], fraction=0.046, pad=0.04, label="share of attention")
    fig.tight_layout()
    save_figure(paths[2], fig)
    return paths
