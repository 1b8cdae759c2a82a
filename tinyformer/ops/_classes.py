"""What cross_entropy and nll_loss share: class-index targets checked and laid out as rows, class
weights, and PyTorch's reductions over the rows."""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyformer import backend, device_checks
from tinyformer.autograd import OpError
from tinyformer.ops._util import data_of
from tinyformer.ops.permute import permute
from tinyformer.ops.reshape import reshape
from tinyformer.opspec import Sample, floats
from tinyformer.tensor import Tensor


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

    def out_of_range() -> OpError:
        position = tuple(int(i[0]) for i in backend.to_host(bad).nonzero())
        return OpError(
            f"{op}: target {int(target[position])} at position {position} is out of "
            f"range for {n_classes} classes (valid: 0..{n_classes - 1}, or ignore_index="
            f"{ignore_index})"
            + (" (found on the device, raised at the next read)" if on_device else "")
        )

    on_device = backend.is_device_array(bad)
    device_checks.check(bad, out_of_range)  # on a device: at the next read, not a sync now


def class_rows(
    op: str, scores: Tensor, target: Any, ignore_index: int, reduction: str
) -> tuple[Tensor, np.ndarray]:
    """Check `scores` (N, C, ...) against class indices `target` (N, ...), as PyTorch shapes
    them, and return the scores as rows (R, C) with the target (N, ...) (for a single example,
    (C,) and a scalar: (1, C) and (1,))."""
    target = data_of(target)
    if not backend.is_device_array(target):
        target = np.asarray(target)
    if scores.ndim == 1:  # one unbatched example: (C,) and a scalar target
        scores, target = reshape(scores, 1, -1), target.reshape(1)
    if scores.ndim < 2:
        raise OpError(f"{op}: input needs shape (N, C, ...), got {scores.shape}")
    if reduction not in ("mean", "sum", "none"):
        raise OpError(f"{op}: reduction must be mean, sum or none, got {reduction!r}")
    _check_target(op, scores.shape, target, ignore_index)  # on the host, before the move
    target = backend.to_device(target, scores.device)
    n_classes = scores.shape[1]
    if scores.ndim > 2:  # (N, C, d...) -> (N, d..., C) -> (R, C)
        scores = permute(scores, 0, *range(2, scores.ndim), 1)
    return reshape(scores, -1, n_classes), target


def class_weights(op: str, weight: Any, rows: Tensor) -> np.ndarray | None:
    """`weight` (C,), one weight per class as in PyTorch, as an array of the rows' dtype on
    their device; None stays None. Weights are data: they get no gradient (PyTorch's losses do
    not train them). Host data (a list, an ndarray) is moved to the rows' device; a Tensor or
    device array elsewhere is an error, as for binary_cross_entropy_with_logits' weights."""
    if weight is None:
        return None
    w = data_of(weight)
    if isinstance(weight, Tensor) or backend.is_device_array(w):
        if (where := backend.device_of(w)) != rows.device:
            raise OpError(f"{op}: weight is on {where} and input on {rows.device}: move one")
    else:
        w = np.asarray(w)
    n_classes = rows.shape[1]
    if w.shape != (n_classes,):
        raise OpError(
            f"{op}: weight must hold one number per class, shape ({n_classes},), got {w.shape}"
        )
    if w.dtype.kind not in "fiu":
        raise OpError(f"{op}: weight must be real numbers, got {w.dtype}")
    return backend.to_device(w.astype(rows.dtype, copy=False), rows.device)


def target_weights(weight: np.ndarray, target: np.ndarray, ignore_index: int) -> np.ndarray:
    """weight[target] for each row (R,), 0 where the target is ignore_index."""
    xp = backend.get_array_module(weight)
    keep = target != ignore_index
    return xp.where(keep, weight[xp.where(keep, target, 0)], xp.zeros((), weight.dtype))


def reduce_rows(
    rows: Tensor,
    target: np.ndarray,
    ignore_index: int,
    reduction: str,
    row_weights: np.ndarray | None = None,
) -> Tensor:
    """Per-row losses (R,) reduced as PyTorch does: "sum", "none" (in the target's shape), or
    "mean": the sum divided by the number of rows whose target is not ignore_index or, with
    class weights, by the sum of the rows' weights (`target_weights`; NaN if that is 0)."""
    if reduction == "none":
        return reshape(rows, target.shape)
    if reduction == "sum":
        return rows.sum()
    count = (target != ignore_index).sum() if row_weights is None else row_weights.sum()
    if backend.is_device_array(count):  # divide on the device: float(count) would be a sync
        return rows.sum() / Tensor(count.astype(rows.dtype))  # 0 / 0 is NaN, as PyTorch's
    total = float(count)
    return rows.sum() / total if total else rows.sum() * float("nan")


def class_sample(draw) -> Sample:
    """Scores (N, C) or (N, C, d), class targets, ignore_index, reduction and, a third of the
    time, class weights (the other draws keep cross_entropy's fused primitives, which only
    unweighted losses reach, compared with their kernels): what both losses' specs share."""
    n, c = draw.integers(1, 5), draw.integers(2, 5)
    extra = draw.shape(min_dims=0, max_dims=1, max_side=3)
    target = draw.rng.integers(0, c, size=(n, *extra))
    ignore = draw.choice([-100, 0])
    if ignore == 0:
        target[0] = 1  # keep at least one row that counts
    weighted = draw.choice([False, False, True])
    kwargs = {
        "weight": draw.rng.uniform(0.2, 2.0, c) if weighted else None,
        "ignore_index": ignore,
        "reduction": draw.choice(["mean", "sum", "none"]),
    }
    return Sample([floats(draw, (n, c, *extra), -3, 3), target], kwargs)
