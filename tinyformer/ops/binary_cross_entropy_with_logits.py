"""binary_cross_entropy_with_logits: the cross-entropy of independent yes/no targets, computed
from logits (scores before the sigmoid). For multi-label classification and for the "real or
fake" output of a discriminator; with one logit per example it is logistic regression's loss.

Forward   p = sigmoid(x).  -[t log p + (1 - t) log(1 - p)], written without p:
              log p = -softplus(-x),  log(1 - p) = -x - softplus(-x)
          so  loss = (1 - t) x + softplus(-x),   softplus(z) = log(1 + e^z)
                                                 = max(z, 0) + log(1 + e^-|z|)   (no overflow).
          pos_weight c multiplies the positive term t log p, which makes the softplus term's
          factor l = 1 + (c - 1) t:   loss = (1 - t) x + l softplus(-x).
          weight w multiplies each element's loss; then reduction "mean" (over all elements),
          "sum" or "none". Targets may be any value in [0, 1] (soft labels), not only 0 and 1.
Backward  d softplus(-x)/dx = -sigmoid(-x) = p - 1, so
              gx = g w ((1 - t) + l (p - 1))       which is g w (p - t) when c = 1;
              gt = g w (-x + (c - 1) softplus(-x))  (PyTorch gives targets a gradient too).
Saved     x and t (and the weights, which are data): p is recomputed in backward.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import data_of, same_shape_target
from tinyformer.ops.sigmoid import stable_sigmoid
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["binary_cross_entropy_with_logits"]


def _softplus_neg(x: np.ndarray) -> np.ndarray:
    """softplus(-x) = log(1 + e^-x), without overflow for any x."""
    xp = backend.get_array_module(x)
    return xp.maximum(-x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


class BinaryCrossEntropyWithLogits(Function):
    @staticmethod
    def forward(ctx, x, t, *, weight, pos_weight, reduction):
        sp = _softplus_neg(x)
        lw = 1 if pos_weight is None else 1 + (pos_weight - 1) * t
        loss = (1 - t) * x + lw * sp
        if weight is not None:
            loss = loss * weight
        ctx.save_for_backward(x, t)
        ctx.weight, ctx.pos_weight, ctx.reduction = weight, pos_weight, reduction
        if reduction == "none":
            return loss
        total = loss.sum()
        return total / loss.size if reduction == "mean" else total

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        w, c = ctx.weight, ctx.pos_weight
        if ctx.reduction == "mean":
            g = g / x.size
        if w is not None:
            g = g * w
        p = stable_sigmoid(x)
        if c is None:
            gx = g * (p - t)
        else:
            gx = g * ((1 - t) + (1 + (c - 1) * t) * (p - 1))
        gt = None
        if ctx.needs_input_grad[1]:
            gt = g * (-x if c is None else -x + (c - 1) * _softplus_neg(x))
        return gx, gt


_OP = "binary_cross_entropy_with_logits"


def _factor(name: str, value: Any, input: Tensor, op: str = _OP) -> np.ndarray | None:  # noqa: A002
    """`weight` or `pos_weight` of loss `op`: data in input's dtype, which must broadcast to
    input."""
    if value is None:
        return None
    if isinstance(value, Tensor) and value.requires_grad:
        raise OpError(f"{op}: {name} is data here, not a tensor that needs a gradient")
    arr = data_of(value)
    if isinstance(value, Tensor) or backend.is_device_array(arr):
        if (where := backend.device_of(arr)) != input.device:
            raise OpError(f"{op}: {name} is on {where} and input on {input.device}: move one")
        arr = arr.astype(input.dtype, copy=False)
    else:  # host data (an ndarray, a list, a number): moved to input's device here
        arr = backend.to_device(np.asarray(arr, input.dtype), input.device)
    try:
        fits = np.broadcast_shapes(arr.shape, input.shape) == input.shape
    except ValueError:
        fits = False
    if not fits:
        raise OpError(
            f"{op}: {name} of shape {arr.shape} does not broadcast to input {input.shape}"
        )
    return arr


def binary_cross_entropy_with_logits(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Any,
    weight: Any = None,
    *,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """Binary cross-entropy of `target` probabilities (0 and 1, or soft labels) under
    sigmoid(`input`), computed from the logits without overflow. `weight` scales each element's
    loss, `pos_weight` the positive term (with C labels it is usually of shape (C,): a label
    seen in 1 example of 10 gets pos_weight 9 to balance its classes)."""
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"{_OP}: reduction must be mean, sum or none, got {reduction!r}")
    return BinaryCrossEntropyWithLogits.apply(
        input,
        same_shape_target(_OP, input, target),
        weight=_factor("weight", weight, input),
        pos_weight=_factor("pos_weight", pos_weight, input),
        reduction=reduction,
    )


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    kwargs = {
        "weight": floats(draw, shape, 0.5, 2.0) if draw.integers(0, 1) else None,
        "pos_weight": floats(draw, shape[-1:], 0.5, 3.0) if draw.integers(0, 1) else None,
        "reduction": draw.choice(["mean", "sum", "none"]),
    }  # weights in kwargs: data, not differentiable inputs
    return Sample([floats(draw, shape, -4.0, 4.0), floats(draw, shape, 0.0, 1.0)], kwargs)


SPECS = [
    OpSpec(
        _OP,
        binary_cross_entropy_with_logits,
        _sample,
        functions=(BinaryCrossEntropyWithLogits,),
    )
]
