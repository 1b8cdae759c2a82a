"""The margin losses: ranking, triplet and embedding losses, and the soft margin (logistic)
losses, as PyTorch's. Each is composed of differentiable ops; `reduction` is "mean", "sum" or
"none", as the other losses'.

margin_ranking_loss   l = max(0, -t (x1 - x2) + margin), t = +1 where x1 should rank higher
triplet_margin_loss   l = max(0, margin + d(a, p) - d(a, n)), d = pairwise_distance (swap:
                      d(a, n) replaced by min(d(a, n), d(p, n)), Balntas et al., 2016)
cosine_embedding_loss l = 1 - cos(x1, x2) where t = 1, max(0, cos(x1, x2) - margin) where
                      t = -1, 0 for other targets; cos = x1.x2 / sqrt((|x1|^2 + 1e-12)
                      (|x2|^2 + 1e-12)) over the last axis (PyTorch's form of the cosine)
soft_margin_loss      l = log(1 + e^(-t x)), computed as softplus(z) = max(z, 0) +
                      log(1 + e^-|z|), z = -t x, which cannot overflow
multilabel_soft_margin_loss
                      l = -sum_c w_c (t_c log sigmoid(x_c) + (1 - t_c) log sigmoid(-x_c)) / C
                      over the last axis (C classes), one loss per sample
Backward  through the ops they are made of; the hinges' gradients are clamp's (the gradient
          passes where the hinge's argument is >= 0, as torch.clamp_min's).
Saved     what those ops save.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer.autograd import OpError
from tinyformer.ops._util import array_of, data_of, same_shape_target
from tinyformer.ops.abs import abs
from tinyformer.ops.clip import clip
from tinyformer.ops.exp import exp
from tinyformer.ops.l1_loss import reduce_loss
from tinyformer.ops.log1p import log1p
from tinyformer.ops.logsigmoid import logsigmoid
from tinyformer.ops.maximum import maximum, minimum
from tinyformer.ops.pairwise_distance import broadcast_shape, pairwise_distance
from tinyformer.ops.sqrt import sqrt
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = [
    "cosine_embedding_loss", "margin_ranking_loss", "multilabel_soft_margin_loss",
    "soft_margin_loss", "triplet_margin_loss",
]  # fmt: skip

REDUCTIONS = ["mean", "sum", "none"]


def operand(op: str, x: Any, like: Tensor) -> Tensor:
    """A loss's second operand (a target, a weight): a Tensor that needs a gradient stays one;
    anything else is data, converted to `like`'s dtype and device."""
    if isinstance(x, Tensor) and x.requires_grad:
        if x.dtype != like.dtype:
            raise OpError(f"{op}: inputs of {like.dtype} and {x.dtype}: convert one (x.to())")
        return x
    return Tensor(data_of(x), dtype=like.dtype, device=like.device)


def margin_ranking_loss(
    input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, *, reduction: str = "mean"
) -> Tensor:
    """`max(0, -target (input1 - input2) + margin)`: target 1 asks input1 to rank above input2
    by `margin`, -1 below. The three share their number of axes and broadcast, as in PyTorch."""
    op = "margin_ranking_loss"
    target = operand(op, target, input1)
    if not input1.ndim == input2.ndim == target.ndim:
        raise OpError(
            f"{op}: input1 {input1.shape}, input2 {input2.shape} and target {target.shape} "
            "must have the same number of axes"
        )
    broadcast_shape(op, input1=input1.shape, input2=input2.shape, target=target.shape)
    return reduce_loss(op, clip(-target * (input1 - input2) + margin, 0.0), reduction)


def triplet_margin_loss(
    anchor: Tensor,
    positive: Tensor,
    negative: Tensor,
    margin: float = 1.0,
    p: float = 2.0,
    eps: float = 1e-6,
    swap: bool = False,
    *,
    reduction: str = "mean",
) -> Tensor:
    """`max(0, margin + d(anchor, positive) - d(anchor, negative))`, d the p-norm distance
    over the last axis (`pairwise_distance`); inputs (N, D) or (D,)."""
    op = "triplet_margin_loss"
    if not margin > 0:
        raise OpError(f"{op}: margin must be greater than 0, got {margin!r}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise OpError(
            f"{op}: anchor {anchor.shape}, positive {positive.shape} and negative "
            f"{negative.shape} must have the same number of axes"
        )
    broadcast_shape(op, anchor=anchor.shape, positive=positive.shape, negative=negative.shape)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:  # the harder of the two negatives' distances
        d_neg = minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return reduce_loss(op, clip(d_pos + margin - d_neg, 0.0), reduction)


def cosine_embedding_loss(
    input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0, *, reduction: str = "mean"
) -> Tensor:
    """`1 - cos` for pairs with target 1 (pull together), `max(0, cos - margin)` for target -1
    (push apart); inputs (N, D) with target (N,), or (D,) with a 0-d target."""
    op = "cosine_embedding_loss"
    t = array_of(target)  # labels: compared, never differentiated
    if input1.shape != input2.shape or input1.ndim not in (1, 2):
        raise OpError(
            f"{op}: input1 {input1.shape} and input2 {input2.shape} must have one shape, "
            "(N, D) or (D,)"
        )
    if t.shape != input1.shape[:-1]:
        raise OpError(
            f"{op}: target must be of shape {input1.shape[:-1]} for inputs {input1.shape}, got "
            f"shape {t.shape}"
        )
    dot = (input1 * input2).sum(-1)
    squares = ((input1 * input1).sum(-1) + 1e-12) * ((input2 * input2).sum(-1) + 1e-12)
    cos = dot / sqrt(squares)
    pull, push = where(t == 1, 1.0 - cos, 0.0), where(t == -1, clip(cos - margin, 0.0), 0.0)
    return reduce_loss(op, pull + push, reduction)


def soft_margin_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    *,
    reduction: str = "mean",
) -> Tensor:
    """`log(1 + exp(-target input))`, the logistic loss of labels +1 and -1 (shapes equal)."""
    z = -same_shape_target("soft_margin_loss", input, target) * input
    return reduce_loss("soft_margin_loss", maximum(z, 0.0) + log1p(exp(-abs(z))), reduction)


def multilabel_soft_margin_loss(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    weight: Any = None,
    *,
    reduction: str = "mean",
) -> Tensor:
    """One binary cross-entropy (from logits) per class, averaged over the classes (the last
    axis); `target` of input's shape holds 0/1 labels, `weight` (C,) scales each class."""
    op = "multilabel_soft_margin_loss"
    if input.ndim < 1:
        raise OpError(f"{op}: input must be (N, C) or (C,), got shape {input.shape}")
    t = same_shape_target(op, input, target)
    loss = -(t * logsigmoid(input) + (1.0 - t) * logsigmoid(-input))
    if weight is not None:
        weight = operand(op, weight, input)
        if broadcast_shape(op, input=input.shape, weight=weight.shape) != input.shape:
            raise OpError(f"{op}: weight {weight.shape} must broadcast to input {input.shape}")
        loss = loss * weight
    return reduce_loss(op, loss.sum(-1) / input.shape[-1], reduction)


# -- specs: each keeps its inputs off the hinges' kinks -------------------------------------------


def _ranking_sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    t = draw.rng.choice([-1.0, 1.0], size=shape)
    margin = draw.choice([0.0, 0.5])
    z = floats(draw, shape, avoid=(0.0,))  # the hinge's argument, away from its kink
    x2 = floats(draw, shape)
    x1 = x2 + (margin - z) * t  # so that -t (x1 - x2) + margin = z
    kwargs = {"margin": margin, "reduction": draw.choice(REDUCTIONS)}
    return Sample([np.asarray(x1), np.asarray(x2), np.asarray(t)], kwargs)


def _distances(a: np.ndarray, b: np.ndarray, p: float, eps: float) -> np.ndarray:
    return np.linalg.norm(a - b + eps, ord=p, axis=-1)


def _triplet_sample(draw) -> Sample:
    shape = draw.choice([(draw.integers(1, 3), draw.integers(1, 4)), (draw.integers(1, 4),)])
    p, margin, swap = draw.choice([2.0, 3.0]), draw.choice([1.0, 0.5]), draw.choice([False, True])
    while True:  # redraw until no hinge nor min sits within 0.05 of its kink
        a, pos, neg = (draw.rng.uniform(-1.5, 1.5, size=shape) for _ in range(3))
        d_pos, d_neg = _distances(a, pos, p, 1e-6), _distances(a, neg, p, 1e-6)
        d_swap = _distances(pos, neg, p, 1e-6)
        kinks = [margin + d_pos - np.minimum(d_neg, d_swap) if swap else margin + d_pos - d_neg]
        kinks += [d_neg - d_swap] if swap else []
        if all(np.all(np.abs(k) > 0.05) for k in kinks) and min(d_pos.min(), d_neg.min()) > 0.1:
            break
    kwargs = {"margin": margin, "p": p, "swap": swap, "reduction": draw.choice(REDUCTIONS)}
    return Sample([a, pos, neg], kwargs)


def _cosine_sample(draw) -> Sample:
    shape = draw.choice([(draw.integers(1, 4), draw.integers(1, 4)), (draw.integers(1, 4),)])
    x1, x2 = floats(draw, shape), floats(draw, shape)
    margin = draw.choice([0.0, 0.5, -0.3])
    t = draw.rng.choice([-1, 1, 0], size=shape[:-1])
    cos = (x1 * x2).sum(-1) / np.sqrt((x1 * x1).sum(-1) * (x2 * x2).sum(-1))
    t = np.where((t == -1) & (np.abs(cos - margin) < 0.05), 1, t)  # off push's kink
    return Sample([x1, x2, t], {"margin": margin, "reduction": draw.choice(REDUCTIONS)})


def _soft_margin_sample(draw) -> Sample:
    shape = draw.shape(min_dims=0)
    t = draw.rng.choice([-1.0, 1.0], size=shape).astype(np.int64)  # labels: data
    return Sample([floats(draw, shape, -4.0, 4.0), t], {"reduction": draw.choice(REDUCTIONS)})


def _multilabel_sample(draw) -> Sample:
    shape = draw.shape(min_dims=1, max_dims=2)
    args = [floats(draw, shape, -4.0, 4.0), draw.rng.random(shape)]  # soft labels: smooth
    kwargs: dict[str, Any] = {"reduction": draw.choice(REDUCTIONS)}
    if draw.integers(0, 1):
        kwargs["weight"] = draw.rng.uniform(0.5, 2.0, size=shape[-1:])
    return Sample(args, kwargs)


SPECS = [
    OpSpec("margin_ranking_loss", margin_ranking_loss, _ranking_sample),
    OpSpec("triplet_margin_loss", triplet_margin_loss, _triplet_sample),
    OpSpec("cosine_embedding_loss", cosine_embedding_loss, _cosine_sample),
    OpSpec("soft_margin_loss", soft_margin_loss, _soft_margin_sample),
    OpSpec("multilabel_soft_margin_loss", multilabel_soft_margin_loss, _multilabel_sample),
]
