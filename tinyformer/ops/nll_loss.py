"""nll_loss: the negative log-likelihood of class indices under log-probabilities, as PyTorch's
`F.nll_loss`. With `log_softmax` over the classes it is cross-entropy:
cross_entropy(z, t) == nll_loss(log_softmax(z, axis=1), t).

Shapes    input (N, C) or (N, C, d1, ...) of log-probabilities, classes on axis 1; target (N,)
          or (N, d1, ...) of integer class indices. The Function sees rows: lp (R, C), t (R,).
Forward   loss_r = -lp[r, t_r], 0 for rows whose target is `ignore_index`.
          reduction: "mean" (over kept rows; NaN if none is kept, as in PyTorch), "sum", "none".
Backward  glp[r, t_r] = -g_r, 0 everywhere else: the loss reads one entry of each row, so only
          that entry has a gradient (g_r is 0 for ignored rows).
Saved     the targets (made safe to index) and the kept-row mask; no values of lp are needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.autograd import Function
from tinyformer.ops.cross_entropy import _sample as cross_entropy_sample
from tinyformer.ops.cross_entropy import class_rows, reduce_rows
from tinyformer.tensor import Tensor
from tinyformer.testing import OpSpec, Sample


class NLLLoss(Function):
    @staticmethod
    def forward(ctx, lp, target, *, ignore_index):
        keep = target != ignore_index
        picked = np.where(keep, target, 0)  # ignored rows read column 0, then are zeroed
        ctx.picked, ctx.keep, ctx.shape = picked, keep, lp.shape
        return np.where(keep, -lp[np.arange(lp.shape[0]), picked], np.zeros((), lp.dtype))

    @staticmethod
    def backward(ctx, g):
        glp = np.zeros(ctx.shape, g.dtype)
        glp[np.arange(ctx.shape[0]), ctx.picked] = np.where(ctx.keep, -g, np.zeros((), g.dtype))
        return glp, None


def nll_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    *,  # keywords only: PyTorch's third argument is `weight`, which this one does not take
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class indices `target` (N, ...) under log-probabilities
    `input` (N, C, ...), e.g. the output of `log_softmax(logits, axis=1)`."""
    scores, target = class_rows("nll_loss", input, target, ignore_index, reduction)
    rows = NLLLoss.apply(scores, target.reshape(-1), ignore_index=ignore_index)
    return reduce_rows(rows, target, ignore_index, reduction)


def _sample(draw) -> Sample:
    sample = cross_entropy_sample(draw)  # the same shapes, targets and ignore_index
    del sample.kwargs["label_smoothing"]
    return sample


SPECS = [OpSpec("nll_loss", nll_loss, _sample, functions=(NLLLoss,))]
