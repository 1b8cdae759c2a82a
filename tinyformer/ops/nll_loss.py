"""nll_loss: the negative log-likelihood of class indices under log-probabilities, as PyTorch's
`F.nll_loss`. With `log_softmax` over the classes it is cross-entropy:
cross_entropy(z, t) == nll_loss(log_softmax(z, axis=1), t).

Shapes    input (N, C) or (N, C, d1, ...) of log-probabilities, classes on axis 1; target (N,)
          or (N, d1, ...) of integer class indices. The Function sees rows: lp (R, C), t (R,).
Forward   loss_r = -lp[r, t_r], 0 for rows whose target is `ignore_index`.
          With class weights w (C,): loss_r = -w[t_r] lp[r, t_r] (a product with the constant
          w[t_r], so its gradient is w[t_r] times the one below).
          reduction: "mean" (over kept rows; with weights, divided by the kept rows' sum of
          w[t_r] instead of their count; NaN if that is 0, as in PyTorch), "sum", "none".
Backward  glp[r, t_r] = -g_r, 0 everywhere else: the loss reads one entry of each row, so only
          that entry has a gradient (g_r is 0 for ignored rows).
Saved     the targets (made safe to index) and the kept-row mask; no values of lp are needed.
"""

from __future__ import annotations

from typing import Any

from tinyformer import backend
from tinyformer.autograd import Function
from tinyformer.ops._classes import (
    class_rows,
    class_sample,
    class_weights,
    reduce_rows,
    target_weights,
)
from tinyformer.opspec import OpSpec
from tinyformer.tensor import Tensor

__all__ = ["nll_loss"]


class NLLLoss(Function):
    @staticmethod
    def forward(ctx, lp, target, *, ignore_index):
        xp = backend.get_array_module(lp)
        keep = target != ignore_index
        picked = xp.where(keep, target, 0)  # ignored rows read column 0, then are zeroed
        ctx.picked, ctx.keep, ctx.shape = picked, keep, lp.shape
        return xp.where(keep, -lp[xp.arange(lp.shape[0]), picked], xp.zeros((), lp.dtype))

    @staticmethod
    def backward(ctx, g):
        xp = backend.get_array_module(g)
        glp = xp.zeros(ctx.shape, g.dtype)
        glp[xp.arange(ctx.shape[0]), ctx.picked] = xp.where(ctx.keep, -g, xp.zeros((), g.dtype))
        return glp, None


def nll_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    weight: Any = None,
    *,  # keywords only: PyTorch's next ones are size_average and reduce, long deprecated
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices `target` (N, ...) under log-probabilities
    `input` (N, C, ...), e.g. the output of `log_softmax(logits, axis=1)`; `weight` (C,) weighs
    each class (data: it gets no gradient)."""
    scores, target = class_rows("nll_loss", input, target, ignore_index, reduction)
    w = class_weights("nll_loss", weight, scores)
    rows = NLLLoss.apply(scores, target.reshape(-1), ignore_index=ignore_index)
    if w is None:
        return reduce_rows(rows, target, ignore_index, reduction)
    w_rows = target_weights(w, target.reshape(-1), ignore_index)
    return reduce_rows(rows * w_rows, target, ignore_index, reduction, w_rows)


SPECS = [OpSpec("nll_loss", nll_loss, class_sample, functions=(NLLLoss,))]
