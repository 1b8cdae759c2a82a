"""What `tinyformer train mae` leaves to look at: reconstructions.png, and at the end a table,
results.json and compare.png (the pretraining loss curve beside both classifiers' accuracy)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.fileio import save_figure, save_json
from tinyformer.models.mae import MAE, patchify, unpatchify

__all__ = ["masked_images", "plot_reconstructions", "report"]


def masked_images(images: np.ndarray, mask: np.ndarray, patch_size: int, fill: float) -> np.ndarray:
    """images (B, C_in, H, W) with the patches where mask (B, N) is 1 set to `fill`."""
    patches = patchify(images, patch_size).copy()  # (B, N, L)
    patches[mask.astype(bool)] = fill
    return unpatchify(patches, patch_size, images.shape[1])


def plot_reconstructions(model: MAE, images: np.ndarray, path: Path, seed: int = 0) -> None:
    """Rows: what the encoder sees (hidden patches grey), the decoder's output with the visible
    patches pasted back, the decoder's whole output, the original. A model trained on
    normalised targets predicts each patch's shape, not its brightness or contrast: those are
    put back from the true patch (`MAE.reconstruct`), and the rows say so."""
    from matplotlib.figure import Figure

    cfg = model.config
    noise = np.random.default_rng([seed, 2]).random((len(images), cfg.num_patches))
    was_training = model.training
    model.eval()
    recon, mask = model.reconstruct(images, noise)
    model.train(was_training)
    visible = masked_images(images, mask, cfg.patch_size, 0.0)  # hidden patches zeroed
    pasted = visible + masked_images(recon, 1 - mask, cfg.patch_size, 0.0)  # + only hidden ones
    note = "\n(true patch mean, std)" if cfg.norm_pix_loss else ""
    rows = [
        ("input to the encoder", masked_images(images, mask, cfg.patch_size, 0.5)),
        ("reconstruction + visible" + note, pasted),
        ("decoder output" + note, recon),
        ("original", images),
    ]
    fig = Figure(figsize=(1.3 * len(images), 5.6))
    axes = fig.subplots(len(rows), len(images), squeeze=False)
    for r, (label, batch) in enumerate(rows):
        for i, image in enumerate(batch):
            ax = axes[r, i]
            if image.shape[0] == 1:
                ax.imshow(image[0], cmap="gray", vmin=0, vmax=1)
            else:
                ax.imshow(image.transpose(1, 2, 0).clip(0, 1))
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(label, fontsize=8)
    hidden = int(mask[0].sum())
    fig.suptitle(f"held-out images, {hidden} of {cfg.num_patches} patches hidden (grey)")
    fig.tight_layout()
    save_figure(path, fig)


def _steady_ms(log: dict[str, Any]) -> float:
    """Median milliseconds per step, leaving out the first tenth (warm-up, kernel compiles)."""
    ms = log["ms"][len(log["ms"]) // 10 :] or log["ms"]
    return float(np.median(ms)) if ms else float("nan")


def report(cfg: Any, logs: dict[str, Any]) -> dict[str, Any]:
    """Print the pretrained-vs-scratch table; write results.json and compare.png."""
    out = Path(cfg.out_dir)
    pre = logs["pretrain"]["evals"][-1]
    rows = {name: logs[name]["evals"][-1] for name in ("pretrained", "scratch")}
    best = {name: max(e["test_acc"] for e in logs[name]["evals"]) for name in rows}
    ms = {name: _steady_ms(logs[name]) for name in ("pretrain", *rows)}
    what = "linear probe" if cfg.probe else "fine-tuning"
    print(f"\nMAE pretraining, {cfg.pretrain_iters} steps: held-out masked-patch loss "
          f"{pre['val']:.3f} ({ms['pretrain']:.1f} ms/step)")  # fmt: skip
    print(f"{what}, {cfg.finetune_iters} steps each:")
    print(f"  {'start':<22} {'test accuracy':>14} {'best':>8} {'test loss':>10} {'ms/step':>8}")
    for name, label in (("pretrained", "MAE-pretrained encoder"), ("scratch", "random weights")):
        e = rows[name]
        print(f"  {label:<22} {e['test_acc']:>14.1%} {best[name]:>8.1%} {e['test']:>10.3f} "
              f"{ms[name]:>8.1f}")  # fmt: skip
    gain = rows["pretrained"]["test_acc"] - rows["scratch"]["test_acc"]
    print(f"  pretraining adds {gain * 100:+.1f} points of test accuracy for the same budget")
    results = {
        "config": dataclasses.asdict(cfg),
        "pretrain": {**pre, "ms_per_step": ms["pretrain"]},
        "finetune": {
            name: {**rows[name], "best_test_acc": best[name], "ms_per_step": ms[name]}
            for name in rows
        },  # fmt: skip
        "gain": gain,
    }
    save_json(out / "results.json", results)
    _plot(logs, out / "compare.png", what)
    print(f"{out / 'compare.png'}, {out / 'results.json'}")
    return results


def _plot(logs: dict[str, Any], path: Path, what: str) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4))
    ax_pre, ax_acc = fig.subplots(1, 2)
    losses = np.asarray(logs["pretrain"]["loss"])
    window = max(1, min(50, len(losses) // 10))
    smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
    ax_pre.plot(np.arange(window, len(losses) + 1), smooth, label="train (running mean)")
    evals = logs["pretrain"]["evals"]
    ax_pre.plot([e["iter"] for e in evals], [e["val"] for e in evals], "o-", label="held out")
    ax_pre.set(xlabel="pretraining step", ylabel="MSE on hidden patches",
               title="masked-autoencoder pretraining")  # fmt: skip
    for name, color in (("pretrained", "tab:blue"), ("scratch", "tab:orange")):
        evals = logs[name]["evals"]
        ax_acc.plot([e["iter"] for e in evals], [e["test_acc"] for e in evals], "o-",
                    color=color, label=name)  # fmt: skip
    ax_acc.set(xlabel=f"{what} step", ylabel="test accuracy", title=f"{what}: held-out accuracy")
    for ax in (ax_pre, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    save_figure(path, fig)
