"""Optional oracle: every op's forward and backward against PyTorch (torch==2.13.0, CPU) on the
same float64 inputs. Skipped when torch is not installed; `.ci/run` installs it."""

from __future__ import annotations

import numpy as np
import pytest

from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import forward_backward

torch = pytest.importorskip("torch")
TF = torch.nn.functional
pytestmark = pytest.mark.torch


def _dims(x, axis):
    return tuple(range(x.ndim)) if axis is None else axis


def _pieces(pieces):
    return torch.cat([(p * (i + 1)).reshape(-1) for i, p in enumerate(pieces)])


def _index(index):
    parts = index if isinstance(index, tuple) else (index,)
    parts = tuple(torch.from_numpy(p) if isinstance(p, np.ndarray) else p for p in parts)
    return parts if isinstance(index, tuple) else parts[0]


def _sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None):
    # torch refuses attn_mask together with is_causal: fold the causal mask into attn_mask.
    mask = None if attn_mask is None else torch.from_numpy(attn_mask)
    if is_causal:
        tri = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        if mask is None:
            mask = tri
        elif mask.dtype == torch.bool:
            mask = mask & tri
        else:
            mask = mask.masked_fill(~tri, float("-inf"))
    return TF.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def _embedding(idx, w, padding_idx):
    y = TF.embedding(idx, w, padding_idx=padding_idx)
    if padding_idx is None:
        return y
    read = (idx == padding_idx % w.shape[0]).unsqueeze(-1)
    return y - y.detach() * read  # as the embedding spec zeroes the padding row's outputs


def _scatter(x, src, axis, index):
    # torch's backward fails for a src longer than index ("invalid gradient ... shape"): pass
    # it the part that is read, whose gradient the slice pads with zeros, as tinyformer's does.
    src = src[tuple(slice(0, n) for n in index.shape)]
    return torch.scatter(x, axis, torch.from_numpy(index), src)


def _pad(x, pad, mode):
    # torch pads k axes with these modes only in inputs of k + 1 or k + 2 axes: lend it one
    lend = x.ndim == len(pad) // 2
    y = TF.pad(x.unsqueeze(0) if lend else x, pad, mode=mode)
    return y.squeeze(0) if lend else y


def _ones(weight):
    return 1.0 if weight is None else torch.as_tensor(weight)


def _reduce(rows, reduction):
    return {"none": rows, "sum": rows.sum(), "mean": rows.mean()}[reduction]


def _bce_with_logits(x, t, weight, pos_weight, reduction):
    weight, pos_weight = (None if a is None else torch.from_numpy(a) for a in (weight, pos_weight))
    return TF.binary_cross_entropy_with_logits(
        x, t, weight, reduction=reduction, pos_weight=pos_weight
    )


def _bce(p, t, weight, reduction):
    weight = None if weight is None else torch.from_numpy(weight)
    return TF.binary_cross_entropy(p, t, weight, reduction=reduction)


def _class_weight(kwargs):
    weight = kwargs["weight"]
    return {**kwargs, "weight": None if weight is None else torch.from_numpy(weight)}


def _prod(x, axis, keepdims):
    # torch.prod reduces one dim at a time: the last first, so the others keep their numbers.
    dims = _dims(x, axis)
    dims = (dims,) if isinstance(dims, int) else dims
    for d in sorted((d % x.ndim for d in dims), reverse=True):
        x = x.prod(d, keepdim=keepdims)
    return x


def _written(x, v, index):
    out = x.clone()
    out[_index(index)] = v
    return out


def _weighted_topk(result):
    return result.values * (result.indices + 1)  # as the topk spec weighs them


def _batch_norm(x, w, b, running_mean, running_var, training):
    stats = [None if a is None else torch.from_numpy(a.copy()) for a in (running_mean, running_var)]
    return TF.batch_norm(x, *stats, w, b, training=training)


TORCH = {
    "abs": lambda x: torch.abs(x),
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "remainder": lambda a, b: torch.remainder(a, b),
    "pow": lambda a, b: torch.pow(a, b),
    "pow_number": lambda x, exponent: x**exponent,
    "neg": lambda x: -x,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "silu": TF.silu,
    "gelu": lambda x, approximate: TF.gelu(x, approximate=approximate),
    "clip": lambda x, min, max: torch.clamp(x, min, max),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "where": lambda c, a, b: torch.where(c, a, b),
    "sum": lambda x, axis, keepdims: x.sum(dim=_dims(x, axis), keepdim=keepdims),
    "mean": lambda x, axis, keepdims: x.mean(dim=_dims(x, axis), keepdim=keepdims),
    "max": lambda x, axis, keepdims: torch.amax(x, dim=_dims(x, axis), keepdim=keepdims),
    "min": lambda x, axis, keepdims: torch.amin(x, dim=_dims(x, axis), keepdim=keepdims),
    "var": lambda x, axis, keepdims, correction: torch.var(
        x, dim=_dims(x, axis), keepdim=keepdims, correction=correction
    ),
    "std": lambda x, axis, keepdims, correction: torch.std(
        x, dim=_dims(x, axis), keepdim=keepdims, correction=correction
    ),
    "logsumexp": lambda x, axis, keepdims: torch.logsumexp(x, dim=_dims(x, axis), keepdim=keepdims),
    "matmul": torch.matmul,
    "einsum": lambda *xs, equation: torch.einsum(equation, *xs),
    "linear": lambda x, w, b: TF.linear(x, w, b),
    "reshape": lambda x, shape: x.reshape(shape),
    "flatten": lambda x, start_dim, end_dim: torch.flatten(x, start_dim, end_dim),
    "permute": lambda x, axes: x.permute(axes),
    "transpose": lambda x, axis0, axis1: x.transpose(axis0, axis1),
    "expand": lambda x, shape: x.expand(shape),
    "squeeze": lambda x, axis: x.squeeze() if axis is None else x.squeeze(axis),
    "unsqueeze": lambda x, axis: x.unsqueeze(axis),
    "cat": lambda *xs, axis: torch.cat(xs, dim=axis),
    "stack": lambda *xs, axis: torch.stack(xs, dim=axis),
    "split": lambda x, size, axis: _pieces(torch.split(x, size, dim=axis)),
    "chunk": lambda x, size, axis: _pieces(torch.chunk(x, size, dim=axis)),
    "getitem": lambda x, index: x[_index(index)],
    "setitem": _written,
    "masked_fill": lambda x, mask, value: x.masked_fill(mask, value),
    "clone": torch.clone,
    "astype": lambda x: x.to(x.dtype),
    "argsort": lambda x, axis, descending, stable: (
        x * (torch.argsort(x, dim=axis, descending=descending, stable=stable) + 1)
    ),
    "topk": lambda x, k, axis, largest: _weighted_topk(torch.topk(x, k, dim=axis, largest=largest)),
    "gather": lambda x, axis, index: torch.gather(x, axis, torch.from_numpy(index)),
    "scatter": lambda x, src, axis, index: _scatter(x, src, axis, index),
    "cumsum": lambda x, axis: torch.cumsum(x, axis),
    "tril": lambda x, diagonal: torch.tril(x, diagonal),
    "triu": lambda x, diagonal: torch.triu(x, diagonal),
    "mse_loss": lambda x, t, reduction: TF.mse_loss(x, t, reduction=reduction),
    "pad": lambda x, pad, value: TF.pad(x, pad, value=value),
    "softmax": lambda x, axis: torch.softmax(x, dim=axis),
    "log_softmax": lambda x, axis: torch.log_softmax(x, dim=axis),
    "cross_entropy": lambda x, t, **kw: TF.cross_entropy(x, t, **_class_weight(kw)),
    "nll_loss": lambda x, t, **kw: TF.nll_loss(x, t, **_class_weight(kw)),
    "binary_cross_entropy_with_logits": _bce_with_logits,
    "layer_norm": lambda x, w, b, normalized_shape: TF.layer_norm(x, normalized_shape, w, b),
    "rms_norm": lambda x, w, normalized_shape: TF.rms_norm(x, normalized_shape, w, eps=1e-6),
    "embedding": _embedding,
    "scaled_dot_product_attention": _sdpa,
    "conv1d": lambda x, w, b, **kw: TF.conv1d(x, w, b, **kw),
    "conv2d": lambda x, w, b, **kw: TF.conv2d(x, w, b, **kw),
    "conv_transpose2d": lambda x, w, b, **kw: TF.conv_transpose2d(x, w, b, **kw),
    "max_pool2d": lambda x, **kw: TF.max_pool2d(x, **kw),
    "max_unpool2d": lambda x, idx, **kw: TF.max_unpool2d(x, idx, **kw),
    "avg_pool2d": lambda x, **kw: TF.avg_pool2d(x, **kw),
    "interpolate": lambda x, **kw: TF.interpolate(x, **kw),
    "sin": torch.sin,
    "cos": torch.cos,
    "rsqrt": torch.rsqrt,
    "erf": torch.erf,
    "log1p": torch.log1p,
    "prod": _prod,
    "amax": lambda x, axis, keepdims: torch.amax(x, dim=_dims(x, axis), keepdim=keepdims),
    "amin": lambda x, axis, keepdims: torch.amin(x, dim=_dims(x, axis), keepdim=keepdims),
    "norm": lambda x, p, axis, keepdims: torch.linalg.vector_norm(x, p, dim=axis, keepdim=keepdims),
    "normalize": lambda x, p, axis, eps: TF.normalize(x, p, axis, eps),
    "outer": torch.outer,
    "roll": lambda x, shifts, dims=None: torch.roll(x, shifts, dims),
    "meshgrid": lambda *xs, indexing: _pieces(torch.meshgrid(*xs, indexing=indexing)),
    "hardswish": TF.hardswish,
    "adaptive_avg_pool2d": lambda x, output_size: TF.adaptive_avg_pool2d(x, output_size),
    "unfold": lambda x, **kw: TF.unfold(x, **kw),
    "kl_div": lambda x, t, **kw: TF.kl_div(x, t, **kw),
    "batch_norm": _batch_norm,
    "leaky_relu": lambda x, negative_slope: TF.leaky_relu(x, negative_slope),
    "binary_cross_entropy": _bce,
    "l1_loss": lambda x, t, reduction: TF.l1_loss(x, t, reduction=reduction),
    "smooth_l1_loss": lambda x, t, **kw: TF.smooth_l1_loss(x, t, **kw),
    "huber_loss": lambda x, t, **kw: TF.huber_loss(x, t, **kw),
    "softplus": lambda x, beta, threshold: TF.softplus(x, beta, threshold),
    "elu": lambda x, alpha: TF.elu(x, alpha),
    "cosine_similarity": lambda a, b, axis: TF.cosine_similarity(a, b, dim=axis),
    "group_norm": lambda x, *wb, num_groups, eps=1e-5: TF.group_norm(x, num_groups, *wb, eps=eps),
    "max_pool1d": lambda x, **kw: TF.max_pool1d(x, **kw),
    "avg_pool1d": lambda x, **kw: TF.avg_pool1d(x, **kw),
    "pad_indexed": lambda x, pad, mode: _pad(x, pad, mode),
    "mish": lambda x: TF.mish(x),
    "hardtanh": lambda x, min_val, max_val: TF.hardtanh(x, min_val, max_val),
    "relu6": lambda x: TF.relu6(x),
    "prelu": lambda x, w: TF.prelu(x, w),
    "logsigmoid": lambda x: TF.logsigmoid(x),
    "softsign": lambda x: TF.softsign(x),
    "selu": lambda x: TF.selu(x),
    "celu": lambda x, alpha: TF.celu(x, alpha),
    # torch's own hardsigmoid backward multiplies by 1/6 in float32 (3e-8 off in float64)
    "hardsigmoid": lambda x: TF.relu6(x + 3.0) / 6.0,
    "glu": lambda x, axis: TF.glu(x, dim=axis),
    "pixel_shuffle": lambda x, upscale_factor: TF.pixel_shuffle(x, upscale_factor),
    "pixel_unshuffle": lambda x, downscale_factor: TF.pixel_unshuffle(x, downscale_factor),
    "adaptive_avg_pool1d": lambda x, output_size: TF.adaptive_avg_pool1d(x, output_size),
    "adaptive_max_pool1d": lambda x, output_size: TF.adaptive_max_pool1d(x, output_size),
    "adaptive_max_pool2d": lambda x, output_size: TF.adaptive_max_pool2d(x, output_size),
    "bilinear": lambda a, b, w, bias=None: TF.bilinear(a, b, w, bias),
    "pairwise_distance": lambda a, b, p, keepdims: TF.pairwise_distance(a, b, p, keepdim=keepdims),
    "margin_ranking_loss": lambda a, b, y, **kw: TF.margin_ranking_loss(a, b, y, **kw),
    "triplet_margin_loss": lambda a, pos, neg, **kw: TF.triplet_margin_loss(a, pos, neg, **kw),
    "cosine_embedding_loss": lambda a, b, y, **kw: TF.cosine_embedding_loss(a, b, y, **kw),
    # torch's soft margin losses pass no gradient to the target; these forms, its math, do
    "soft_margin_loss": lambda x, y, reduction: _reduce(torch.log1p(torch.exp(-y * x)), reduction),
    "multilabel_soft_margin_loss": lambda x, y, weight=None, reduction="mean": _reduce(
        -((y * TF.logsigmoid(x) + (1 - y) * TF.logsigmoid(-x)) * _ones(weight)).mean(-1),
        reduction,
    ),
    "gaussian_nll_loss": lambda x, t, var, **kw: TF.gaussian_nll_loss(x, t, var, **kw),
    "poisson_nll_loss": lambda x, t, **kw: TF.poisson_nll_loss(x, t, **kw),
}
# Not compared, on purpose: the dropouts draw their masks, and gumbel_softmax its noise, from
# tinyformer's own generator, so no other library can draw the same (their properties are
# tested in test_op_properties.py, test_layers_extra.py and test_nn_extras.py).
NOT_COMPARED = {"dropout", "dropout1d", "dropout2d", "gumbel_softmax"}


def _torch_can_run(spec, sample) -> bool:
    """PyTorch lacks a few things tinyformer supports; those samples are compared elsewhere."""
    if spec.name in ("getitem", "setitem"):  # torch has no negative-step slices
        parts = sample.kwargs["index"]
        parts = parts if isinstance(parts, tuple) else (parts,)
        return not any(isinstance(p, slice) and (p.step or 1) < 0 for p in parts)
    if spec.name == "scaled_dot_product_attention":  # torch gives NaN for fully masked rows
        mask = sample.kwargs["attn_mask"]
        return mask is None or mask.dtype != np.bool_ or bool(mask.any(-1).all())
    return True


SPECS = [s for s in all_specs() if s.name not in NOT_COMPARED]


def test_every_spec_has_an_oracle():
    assert {s.name for s in SPECS} == set(TORCH)


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_forward_and_backward_match_pytorch(spec):
    compared = 0
    for seed in range(12):
        sample = spec.sample(RandomDraw(seed))
        if not _torch_can_run(spec, sample):
            continue
        y, grads, _ = forward_backward(spec, sample, np.float64, seed)
        args = [
            torch.tensor(a, requires_grad=a.dtype.kind == "f") if isinstance(a, np.ndarray) else a
            for a in sample.args
        ]
        y_torch = TORCH[spec.name](*args, **sample.kwargs)
        np.testing.assert_allclose(y.data, y_torch.detach().numpy(), rtol=1e-10, atol=1e-12)
        if y.requires_grad:
            gy = np.random.default_rng(seed).standard_normal(y.shape)
            y_torch.backward(torch.from_numpy(gy))
            leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
            for ours, theirs in zip(grads, leaves):
                expected = np.zeros(theirs.shape) if theirs.grad is None else theirs.grad.numpy()
                got = np.zeros(theirs.shape) if ours is None else ours
                np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
        compared += 1
    assert compared >= 6
