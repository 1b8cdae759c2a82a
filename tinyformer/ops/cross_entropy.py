"""cross_entropy: softmax cross-entropy of logits against class indices.

Shapes    logits (N, C) or (N, C, d1, ...) with classes on axis 1, as in PyTorch; target (N,) or
          (N, d1, ...) of integer class indices. The primitives see rows: logits (R, C),
          target (R,).
Forward   lse = logsumexp(logits row),  log p_c = logits_c - lse
          loss_row = (1 - eps) * (-log p_target) + eps * mean_c(-log p_c)   (eps = label_smoothing)
          rows whose target is `ignore_index` give 0 and are left out of the mean.
          reduction: "mean" (over kept rows; NaN if none is kept, as in PyTorch), "sum", "none".
Backward  glogits = g_row * (p - (1 - eps) * onehot(target) - eps / C),   p = exp(logits - lse)
          0 for ignored rows. No one-hot matrix is formed: 1 - eps is subtracted in place.
Saved     logits, target and lse (one number a row): p is recomputed in backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import data_of
from tinyformer.ops.permute import permute
from tinyformer.ops.reshape import reshape
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample, floats


@registry.reference("cross_entropy.forward")
def cross_entropy_forward(logits, target, ignore_index, label_smoothing):
    """logits (R, C), target (R,) -> loss (R,), lse (R,)."""
    rows = np.arange(logits.shape[0])
    m = logits.max(axis=1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=1))
    keep = target != ignore_index
    safe_target = np.where(keep, target, 0)
    loss = lse - logits[rows, safe_target]
    if label_smoothing:
        loss = (1 - label_smoothing) * loss + label_smoothing * (lse - logits.mean(axis=1))
    return np.where(keep, loss, np.zeros((), logits.dtype)), lse


@registry.reference("cross_entropy.backward")
def cross_entropy_backward(gloss, logits, target, lse, ignore_index, label_smoothing):
    """gloss (R,) -> glogits (R, C)."""
    rows = np.arange(logits.shape[0])
    keep = target != ignore_index
    g = np.exp(logits - lse[:, None])
    if label_smoothing:
        g -= label_smoothing / logits.shape[1]
    g[rows, np.where(keep, target, 0)] -= 1 - label_smoothing
    return g * np.where(keep, gloss, np.zeros((), gloss.dtype))[:, None]


class CrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, target, *, ignore_index, label_smoothing):
        loss, lse = registry.call(
            "cross_entropy.forward", logits, target, ignore_index, label_smoothing
        )
        ctx.ignore_index, ctx.label_smoothing = ignore_index, label_smoothing
        ctx.save_for_backward(logits, target, lse)
        return loss

    @staticmethod
    def backward(ctx, gloss):
        logits, target, lse = ctx.saved_tensors
        glogits = registry.call(
            "cross_entropy.backward",
            gloss,
            logits,
            target,
            lse,
            ctx.ignore_index,
            ctx.label_smoothing,
        )
        return glogits, None


def _check_target(
    op: str, logits_shape: tuple[int, ...], target: np.ndarray, ignore_index: int
) -> None:
    expected = logits_shape[:1] + logits_shape[2:]
    if target.shape != expected:
        raise OpError(
            f"{op}: target of shape {target.shape} does not fit input of shape "
            f"{logits_shape}; expected {expected} (classes are on axis 1)"
        )
    if target.dtype.kind not in "iu":
        raise OpError(f"{op}: target must hold integer class indices, got {target.dtype}")
    n_classes = logits_shape[1]
    bad = (target != ignore_index) & ((target < 0) | (target >= n_classes))
    if bad.any():
        position = tuple(int(i) for i in np.argwhere(bad)[0])
        raise OpError(
            f"{op}: target {int(target[position])} at position {position} is out of "
            f"range for {n_classes} classes (valid: 0..{n_classes - 1}, or ignore_index="
            f"{ignore_index})"
        )


def class_rows(
    op: str, scores: Tensor, target: Any, ignore_index: int, reduction: str
) -> tuple[Tensor, np.ndarray]:
    """Check `scores` (N, C, ...) against class indices `target` (N, ...), as PyTorch shapes
    them, and return the scores as rows (R, C) with the target (N, ...) (for a single example,
    (C,) and a scalar: (1, C) and (1,))."""
    target = np.asarray(data_of(target))
    if scores.ndim == 1:  # one unbatched example: (C,) and a scalar target
        scores, target = reshape(scores, 1, -1), target.reshape(1)
    if scores.ndim < 2:
        raise OpError(f"{op}: input needs shape (N, C, ...), got {scores.shape}")
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"{op}: reduction must be mean, sum or none, got {reduction!r}")
    _check_target(op, scores.shape, target, ignore_index)
    n_classes = scores.shape[1]
    if scores.ndim > 2:  # (N, C, d...) -> (N, d..., C) -> (R, C)
        scores = permute(scores, 0, *range(2, scores.ndim), 1)
    return reshape(scores, -1, n_classes), target


def reduce_rows(rows: Tensor, target: np.ndarray, ignore_index: int, reduction: str) -> Tensor:
    """Per-row losses (R,) reduced as PyTorch does: "mean" over the rows whose target is not
    ignore_index (NaN if none is), "sum", or "none" (in the target's shape)."""
    if reduction == "none":
        return reshape(rows, target.shape)
    if reduction == "sum":
        return rows.sum()
    kept = int((target != ignore_index).sum())
    return rows.sum() / kept if kept else rows.sum() * float("nan")


def cross_entropy(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    *,  # keywords only: PyTorch's third argument is `weight`, which this one does not take
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits `input` (N, C, ...) and class indices `target` (N, ...)."""
    scores, target = class_rows("cross_entropy", input, target, ignore_index, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise OpError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    rows = CrossEntropy.apply(
        scores, target.reshape(-1), ignore_index=ignore_index, label_smoothing=label_smoothing
    )
    return reduce_rows(rows, target, ignore_index, reduction)


def _sample(draw) -> Sample:
    n, c = draw.integers(1, 5), draw.integers(2, 5)
    extra = draw.shape(min_dims=0, max_dims=1, max_side=3)
    target = draw.rng.integers(0, c, size=(n, *extra))
    ignore = draw.choice([-100, 0])
    if ignore == 0:
        target[0] = 1  # keep at least one row that counts
    kwargs = {
        "ignore_index": ignore,
        "reduction": draw.choice(["mean", "sum", "none"]),
        "label_smoothing": draw.choice([0.0, 0.1]),
    }
    return Sample([floats(draw, (n, c, *extra), -3, 3), target], kwargs)


SPECS = [
    OpSpec(
        "cross_entropy",
        cross_entropy,
        _sample,
        functions=(CrossEntropy,),
        primitives=("cross_entropy.forward", "cross_entropy.backward"),
    )
]
