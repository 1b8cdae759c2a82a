"""kl_div: the Kullback-Leibler divergence KL(target || exp(input)), as PyTorch's `F.kl_div`.

`input` holds log-probabilities (log q); `target` holds probabilities p, or log-probabilities
with `log_target=True`. Pointwise:
Forward   l = p (log p - input)          (0 where p = 0: the limit of p log p)
          l = exp(t) (t - input)         with log_target, t = log p
          reduced by 'none' (keep), 'sum', 'mean' (over every element) or 'batchmean' (the sum
          divided by input.shape[0]: the true KL per sample, the mean over a batch).
Backward  d l / d input = -p                    (or -exp(t))
          d l / d p     = log p - input + 1     (0 where p = 0; PyTorch gives NaN there)
          d l / d t     = exp(t) (t - input + 1)
          each times gy spread back through the reduction (gy, or gy / count).
Saved     input and target: the gradients are cheap functions of them.
"""

from __future__ import annotations

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import same_shape_target
from tinyformer.opspec import OpSpec, Sample, floats
from tinyformer.tensor import Tensor

__all__ = ["kl_div"]

REDUCTIONS = ("none", "sum", "mean", "batchmean")


def _scale(shape: tuple[int, ...], reduction: str) -> float:
    """What each pointwise term is divided by in the reduction."""
    count = 1
    for n in shape:
        count *= n
    if reduction == "mean":
        return float(max(count, 1))
    if reduction == "batchmean" and len(shape) > 0:
        return float(max(shape[0], 1))
    return 1.0


@registry.reference("kl_div.forward")
def kl_div_forward(x, t, reduction, log_target):
    xp = backend.get_array_module(x)
    if log_target:
        pointwise = xp.exp(t) * (t - x)
    else:
        safe = xp.where(t > 0, t, 1.0)  # log is never taken of 0: p log p -> 0 there
        pointwise = xp.where(t > 0, t * (xp.log(safe) - x), -t * x)
    if reduction == "none":
        return pointwise.astype(x.dtype, copy=False)
    total = pointwise.sum() / _scale(x.shape, reduction)
    return xp.asarray(total, dtype=x.dtype)


@registry.reference("kl_div.backward")
def kl_div_backward(gy, x, t, reduction, log_target):
    """-> gx, gt (both of x's shape)."""
    xp = backend.get_array_module(x)
    g = gy if reduction == "none" else gy / _scale(x.shape, reduction)  # 0-d broadcasts
    if log_target:
        p = xp.exp(t)
        gt = p * (t - x + 1.0)
    else:
        p = t
        safe = xp.where(t > 0, t, 1.0)
        gt = xp.where(t > 0, xp.log(safe) - x + 1.0, 0.0)
    return (-g * p).astype(x.dtype, copy=False), (g * gt).astype(t.dtype, copy=False)


class KLDiv(Function):
    @staticmethod
    def forward(ctx, x, t, *, reduction, log_target):
        ctx.params = (reduction, log_target)
        ctx.save_for_backward(x, t)
        return registry.call("kl_div.forward", x, t, reduction, log_target)

    @staticmethod
    def backward(ctx, gy):
        x, t = ctx.saved_tensors
        gx, gt = registry.call("kl_div.backward", gy, x, t, *ctx.params)
        need_x, need_t = ctx.needs_input_grad
        return (gx if need_x else None), (gt if need_t else None)


def kl_div(
    input: Tensor,  # noqa: A002 (named as in PyTorch)
    target: Tensor,
    size_average: None = None,
    reduce: None = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """KL divergence of `target` from `exp(input)`, as `torch.nn.functional.kl_div`
    (`size_average` and `reduce`, long deprecated in PyTorch, must stay None)."""
    if size_average is not None or reduce is not None:
        raise OpError("kl_div: size_average and reduce are deprecated: use reduction=")
    if reduction not in REDUCTIONS:
        raise OpError(f"kl_div: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    target = same_shape_target("kl_div", input, target)
    return KLDiv.apply(input, target, reduction=reduction, log_target=bool(log_target))


def _sample(draw) -> Sample:
    shape = draw.shape(min_dims=1)
    log_target = bool(draw.integers(0, 1))
    x = floats(draw, shape, -3.0, 0.0)
    # probabilities away from 0, where log p's slope blows up (p = 0 exactly is compared with
    # PyTorch in tests/test_torch_layers.py)
    t = floats(draw, shape, -2.0, 0.0) if log_target else floats(draw, shape, 0.05, 1.0)
    kwargs = {"reduction": draw.choice(REDUCTIONS), "log_target": log_target}
    return Sample([x, t], kwargs)


SPECS = [
    OpSpec(
        "kl_div",
        lambda x, t, reduction, log_target: kl_div(
            x, t, reduction=reduction, log_target=log_target
        ),
        _sample,
        functions=(KLDiv,),
        primitives=("kl_div.forward", "kl_div.backward"),
    )
]
