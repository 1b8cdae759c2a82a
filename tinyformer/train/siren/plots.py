"""The closing report of `tinyformer train siren`: a table, results.json, psnr.png, fits.png.

The gradient images compare each fit's gradient with respect to its input coordinates, which
autograd gives exactly (`tf.grad` of the fitted values with respect to the coordinate tensor),
with the target's Sobel gradient (a smoothed central difference), both in value units per unit
of the coordinate (the image spans 2 units).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

import tinyformer as tf
from tinyformer import backend
from tinyformer.fileio import save_figure, save_json
from tinyformer.nn import Module

__all__ = ["coordinate_gradient", "report", "sobel_gradient"]

LABELS = {"siren": "SIREN", "relu": "ReLU MLP", "fourier": "ReLU + Fourier features"}


def coordinate_gradient(model: Module, coords: Any) -> np.ndarray:
    """d value / d (x, y) at every coordinate: (N, 2) on the host. The values at different
    coordinates do not interact, so the gradient of their sum holds every pixel's gradient."""
    x = tf.Tensor(coords, requires_grad=True)
    values, _ = model(x)  # (N, 1)
    (g,) = tf.grad(values.sum(), [x])
    return backend.to_host(g)


def sobel_gradient(image: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """(d/dx, d/dy) of an (H, W) image whose pixels are `spacing` apart: Sobel's kernels
    ([1, 2, 1] smoothing across, central difference along) / (8 spacing); edges replicated."""
    p = np.pad(image, 1, mode="edge")
    gx = p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:] - p[:-2, :-2] - 2 * p[1:-1, :-2] - p[2:, :-2]
    gy = p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:] - p[:-2, :-2] - 2 * p[:-2, 1:-1] - p[:-2, 2:]
    return gx / (8 * spacing), gy / (8 * spacing)


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two images; 0 when one of them is constant."""
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / norms) if norms > 0 else 0.0


def _psnr_curve(log: dict[str, Any]) -> np.ndarray:
    """PSNR (dB) before every step: full batches make the training loss the image's MSE."""
    return 10 * np.log10(4.0 / np.maximum(np.asarray(log["loss"]), 1e-30))


def report(
    cfg: Any, models: dict[str, Module], logs: dict[str, Any], coords: Any, image: np.ndarray
) -> dict[str, Any]:
    """Print the comparison; write results.json, psnr.png and fits.png into cfg.out_dir."""
    out, size = Path(cfg.out_dir), image.shape[0]
    target = image * 2 - 1  # the networks' scale, [-1, 1]
    sobel = np.hypot(*sobel_gradient(target, 2 / (size - 1)))
    fits, grads, results = {}, {}, {}
    for name, model in models.items():
        model.eval()
        with tf.no_grad():
            values, _ = model(coords)
        fits[name] = backend.to_host(values.data).reshape(size, size)
        grads[name] = np.hypot(*coordinate_gradient(model, coords).T).reshape(size, size)
        curve = _psnr_curve(logs[name])
        reached = np.flatnonzero(curve >= 30)
        mse = float(np.mean((fits[name] - target) ** 2))
        results[name] = {
            "psnr": 10 * math.log10(4 / mse) if mse else math.inf,
            "steps_to_30db": int(reached[0]) if len(reached) else None,
            "ms_per_step": float(np.median(logs[name]["ms"][len(logs[name]["ms"]) // 10 :])),
            # how well |gradient| follows the target's edges: the correlation of the two images
            # (scale-free: the exact gradient also holds the ripples between pixel centres,
            # which Sobel's smoothing would not see)
            "gradient_corr": _correlation(grads[name], sobel),
            "lr": cfg.lr if name == "siren" else cfg.baseline_lr,
        }
    print(f"\n{size}x{size}, {cfg.iters} full-batch steps each:")
    print(f"  {'network':<24} {'PSNR (dB)':>9} {'steps to 30 dB':>15} {'ms/step':>8} "
          f"{'|grad| corr':>12}")  # fmt: skip
    for name, r in results.items():
        steps = "-" if r["steps_to_30db"] is None else str(r["steps_to_30db"])
        print(f"  {LABELS[name]:<24} {r['psnr']:>9.2f} {steps:>15} {r['ms_per_step']:>8.0f} "
              f"{r['gradient_corr']:>12.2f}")  # fmt: skip
    save_json(out / "results.json", {"config": dataclasses.asdict(cfg), "results": results})
    _plot_psnr(logs, out / "psnr.png")
    _plot_fits(target, sobel, fits, grads, results, out / "fits.png")
    print(f"{out / 'psnr.png'}, {out / 'fits.png'}, {out / 'results.json'}")
    return results


def _plot_psnr(logs: dict[str, Any], path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4))
    by_step, by_time = fig.subplots(1, 2, sharey=True)
    for name, log in logs.items():
        curve = _psnr_curve(log)
        by_step.plot(np.arange(len(curve)), curve, label=LABELS[name])
        by_time.plot(np.cumsum(log["ms"]) / 1e3, curve, label=LABELS[name])
    for ax, xlabel in ((by_step, "step"), (by_time, "seconds of training (this machine)")):
        ax.axhline(30, color="gray", linestyle=":")
        ax.set(xlabel=xlabel)
        ax.grid(alpha=0.3)
    by_step.set(ylabel="PSNR (dB)", title="fit of the image")
    by_step.legend()
    fig.tight_layout()
    save_figure(path, fig)


def _plot_fits(
    target: np.ndarray,
    sobel: np.ndarray,
    fits: dict[str, np.ndarray],
    grads: dict[str, np.ndarray],
    results: dict[str, Any],
    path: Path,
) -> None:
    from matplotlib.figure import Figure

    n = len(fits) + 1
    fig = Figure(figsize=(3 * n, 6.4))
    axes = fig.subplots(2, n, squeeze=False)
    top = float(np.percentile(sobel, 99.5))  # one scale for every gradient image
    images = [("target", target, "target: Sobel gradient", sobel)]
    images += [(f"{LABELS[k]}: {results[k]['psnr']:.1f} dB", fits[k], "autograd d/d(x, y)",
                grads[k]) for k in fits]  # fmt: skip
    for col, (title, value, gtitle, grad) in enumerate(images):
        axes[0, col].imshow(value, cmap="gray", vmin=-1, vmax=1)
        axes[0, col].set_title(title, fontsize=9)
        axes[1, col].imshow(grad, cmap="magma", vmin=0, vmax=top)
        axes[1, col].set_title(gtitle, fontsize=9)
    for ax in axes.flat:
        ax.set_axis_off()
    fig.suptitle("fits (top) and gradient magnitudes |d value / d (x, y)| (bottom)")
    fig.tight_layout(h_pad=1.5)
    save_figure(path, fig)
