"""cross_entropy: softmax cross-entropy of logits against class indices.

Shapes    logits (N, C) or (N, C, d1, ...) with classes on axis 1, as in PyTorch; target (N,) or
          (N, d1, ...) of integer class indices. The primitives see rows: logits (R, C),
          target (R,).
Forward   lse = logsumexp(logits row),  log p_c = logits_c - lse
          loss_row = (1 - eps) * (-log p_target) + eps * mean_c(-log p_c)   (eps = label_smoothing)
          rows whose target is `ignore_index` give 0 and are left out of the mean.
          reduction: "mean" (over kept rows; NaN if none is kept, as in PyTorch), "sum", "none".
Backward  glogits = dL/dlogits from g_row = dL/dloss_row (R,); 0 for ignored rows. (The
          derivation sits with the code, in `cross_entropy_backward`.)
Saved     logits, target and lse (one number a row): p = softmax(logits) is recomputed in
          backward.

Class probabilities as target (PyTorch's other form: a float target of the logits' shape, for
          soft labels, mixup, distillation): loss_row = -sum_c w_c t_c log p_c, with t smoothed
          to (1 - eps) t + eps / C; "mean" divides by the number of rows, weighted or not, as
          PyTorch does, and ignore_index does not apply. Composed of log_softmax and elementwise
          ops; a target that requires a gradient gets one.

Class weights w (C,), as PyTorch's `weight`: each term of the loss is weighed by its class,
          loss_row = (1 - eps) * w[target] * (-log p_target) + eps / C * sum_c w_c (-log p_c)
          and "mean" divides by the kept rows' sum of w[target] instead of their count. This
          path is composed of log_softmax, nll_loss and elementwise ops, whose backwards give
          the gradient; the fused primitives above serve the unweighted loss that models train
          with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._classes import (
    class_rows,
    class_sample,
    class_weights,
    reduce_rows,
    target_weights,
)
from tinyformer.ops.log_softmax import log_softmax
from tinyformer.ops.nll_loss import NLLLoss
from tinyformer.ops.permute import permute
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import OpSpec, Sample
from tinyformer.tensor import Tensor

__all__ = ["cross_entropy"]


@registry.reference("cross_entropy.forward")
def cross_entropy_forward(logits, target, ignore_index, label_smoothing):
    """logits (R, C), target (R,) -> loss (R,), lse (R,)."""
    ### BEGIN SOLUTION A2.3 forward
    # lse = m + log sum_c exp(logits_c - m), m the row's max: no exponent above 0.
    xp = backend.get_array_module(logits)
    rows = xp.arange(logits.shape[0])
    m = logits.max(axis=1)
    lse = m + xp.log(xp.exp(logits - m[:, None]).sum(axis=1))
    keep = target != ignore_index
    safe_target = xp.where(keep, target, 0)
    loss = lse - logits[rows, safe_target]
    if label_smoothing:
        loss = (1 - label_smoothing) * loss + label_smoothing * (lse - logits.mean(axis=1))
    return xp.where(keep, loss, xp.zeros((), logits.dtype)), lse
    ### END SOLUTION


@registry.reference("cross_entropy.backward")
def cross_entropy_backward(gloss, logits, target, lse, ignore_index, label_smoothing):
    """gloss (R,) -> glogits (R, C)."""
    ### BEGIN SOLUTION A2.3 backward
    # dloss_row/dlogits_c = p_c - (1 - eps) [c = target] - eps / C, p = exp(logits - lse), so
    # glogits = g_row * (p - (1 - eps) * onehot(target) - eps / C). No one-hot matrix is
    # formed: 1 - eps is subtracted at each row's target in place.
    xp = backend.get_array_module(logits)
    rows = xp.arange(logits.shape[0])
    keep = target != ignore_index
    g = xp.exp(logits - lse[:, None])
    if label_smoothing:
        g -= label_smoothing / logits.shape[1]
    g[rows, xp.where(keep, target, 0)] -= 1 - label_smoothing
    return g * xp.where(keep, gloss, xp.zeros((), gloss.dtype))[:, None]
    ### END SOLUTION


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


def _weighted_rows(scores: Tensor, target: np.ndarray, ignore_index: int, w, w_rows, eps):
    """The per-row losses with class weights w (C,) and each row's w[target] (R,), as in the
    module docstring, from log_softmax and nll_loss: (R, C) scores, (R,) targets -> (R,)."""
    lp = log_softmax(scores, axis=1)
    rows = NLLLoss.apply(lp, target, ignore_index=ignore_index) * w_rows
    if not eps:
        return rows
    kept = (target != ignore_index).astype(w.dtype)
    smooth = -(lp * w).sum(axis=1) * kept  # sum_c w_c (-log p_c), 0 for ignored rows
    return rows * (1 - eps) + smooth * (eps / scores.shape[1])


def cross_entropy(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    weight: Any = None,
    *,  # keywords only: PyTorch's next ones are size_average and reduce, long deprecated
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross-entropy between logits `input` (N, C, ...) and class indices `target` (N, ...),
    or class probabilities of the logits' shape; `weight` (C,) weighs each class (data: it gets
    no gradient)."""
    if _probabilities(input, target):
        if ignore_index != -100:
            raise OpError("cross_entropy: ignore_index does not apply to class probabilities")
        return _soft(input, target, weight, reduction, label_smoothing)
    scores, target = class_rows("cross_entropy", input, target, ignore_index, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise OpError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    w = class_weights("cross_entropy", weight, scores)
    flat = target.reshape(-1)
    if w is None:
        rows = CrossEntropy.apply(
            scores, flat, ignore_index=ignore_index, label_smoothing=label_smoothing
        )
        return reduce_rows(rows, target, ignore_index, reduction)
    w_rows = target_weights(w, flat, ignore_index)
    rows = _weighted_rows(scores, flat, ignore_index, w, w_rows, label_smoothing)
    return reduce_rows(rows, target, ignore_index, reduction, w_rows)


def _probabilities(input: Any, target: Any) -> bool:  # noqa: A002
    """Whether `target` is PyTorch's second form: floats of the logits' shape."""
    t = target.data if isinstance(target, Tensor) else target
    dtype = getattr(t, "dtype", None)
    return (
        dtype is not None
        and np.dtype(dtype).kind == "f"
        and tuple(getattr(t, "shape", ())) == tuple(input.shape)
    )


def _soft(input: Tensor, target: Any, weight: Any, reduction: str, eps: float) -> Tensor:  # noqa: A002
    """The loss against class probabilities (module docstring), as rows (R, C)."""
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"cross_entropy: reduction must be mean, sum or none, got {reduction!r}")
    if not 0.0 <= eps <= 1.0:
        raise OpError(f"cross_entropy: label_smoothing must be in [0, 1], got {eps}")
    if not isinstance(target, Tensor):
        target = Tensor(backend.to_device(target, input.device))
    if target.dtype != input.dtype:
        target = target.to(input.dtype)
    lead = (input.shape[0], *input.shape[2:]) if input.ndim > 1 else ()
    n_classes = input.shape[1] if input.ndim > 1 else input.shape[0]

    def rows(x: Tensor) -> Tensor:  # (N, C, d...) -> (R, C)
        if x.ndim > 2:
            x = permute(x, 0, *range(2, x.ndim), 1)
        return reshape(x, -1, n_classes)

    scores, probs = rows(input), rows(target)
    if eps:
        probs = probs * (1 - eps) + eps / n_classes
    terms = log_softmax(scores, axis=1) * probs
    w = class_weights("cross_entropy", weight, scores)
    if w is not None:
        terms = terms * w
    losses = -terms.sum(axis=1)  # (R,)
    if reduction == "none":
        return reshape(losses, lead)
    return losses.sum() if reduction == "sum" else losses.mean()


def _sample(draw) -> Sample:
    sample = class_sample(draw)  # shapes, targets, ignore_index, reduction, weights
    sample.kwargs["label_smoothing"] = draw.choice([0.0, 0.1])
    return sample


SPECS = [
    OpSpec(
        "cross_entropy",
        cross_entropy,
        _sample,
        functions=(CrossEntropy,),
        primitives=("cross_entropy.forward", "cross_entropy.backward"),
    )
]
