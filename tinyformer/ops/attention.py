"""scaled_dot_product_attention: softmax(q k^T * scale + mask) v.

Shapes    q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) -> y (..., Tq, dv); the leading
          (batch, head) dims broadcast. A boolean mask (True = may attend, as in PyTorch) or an
          additive float mask broadcasts to (..., Tq, Tk). `is_causal` lets query i attend to
          keys j <= i (PyTorch's top-left alignment when Tq != Tk).
Forward   s = q k^T * scale  (masked entries -inf),  lse = logsumexp over each row of s
          p = exp(s - lse)   (the attention weights),  y = p v
          A row with every key masked has no distribution: its output is 0 (not NaN), and its lse
          is stored as +inf so that exp(s - lse) = 0 in backward as well.
Backward  gq, gk, gv from gy and what was saved, back through y = p v, the softmax and the
          scores. (The derivation sits with the code, in `attention_backward`.)
Saved     q, k, v, y and lse (one number per query row), never the (Tq, Tk) weights: backward
          recomputes s and p from lse. The reference still forms s in each pass; the fused kernel
          of the same signatures works tile by tile and never does.
Dropout   dropout_p > 0 drops weights: y = dropout(p) v. The weights must then exist, so that
          path is composed from matmul, softmax and dropout, and autograd differentiates it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tinyformer import backend, registry
from tinyformer.autograd import Function, OpError
from tinyformer.ops._util import data_of, unbroadcast
from tinyformer.ops.dropout import dropout
from tinyformer.ops.matmul import matmul
from tinyformer.ops.permute import transpose
from tinyformer.ops.softmax import softmax
from tinyformer.ops.where import where
from tinyformer.opspec import OpSpec, Sample, broadcastable, floats
from tinyformer.tensor import Tensor

__all__ = ["scaled_dot_product_attention"]


def _scores(q, k, mask, causal, scale):
    """s = q k^T * scale with the masks applied: (..., Tq, Tk)."""
    xp = backend.get_array_module(q)
    s = (q @ xp.swapaxes(k, -1, -2)) * q.dtype.type(scale)  # NumPy scalars: no host-to-device copy
    neg_inf = s.dtype.type(-np.inf)
    if causal:
        ### BEGIN SOLUTION A3.2 causal mask
        tq, tk = s.shape[-2:]
        s = xp.where(xp.tri(tq, tk, dtype=bool), s, neg_inf)
        ### END SOLUTION
    if mask is not None:
        s = xp.where(mask, s, neg_inf) if mask.dtype == np.bool_ else s + mask
    return s


def _row_softmax(s):
    """Softmax over the last axis, and its log-sum-exp; rows with every entry -inf give p = 0
    and lse = +inf."""
    ### BEGIN SOLUTION A3.1 softmax and log-sum-exp
    xp = backend.get_array_module(s)
    m = s.max(axis=-1, keepdims=True)
    m = xp.where(xp.isfinite(m), m, xp.zeros((), s.dtype))
    e = xp.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    empty = total == 0
    total = xp.where(empty, 1, total)  # so that no log(0) warns (CuPy has no errstate)
    lse = xp.where(empty, s.dtype.type(np.inf), m + xp.log(total))
    return e / total, lse[..., 0]
    ### END SOLUTION


@registry.reference("attention.forward")
def attention_forward(q, k, v, mask, causal, scale):
    """-> y (..., Tq, dv), lse (..., Tq)."""
    ### BEGIN SOLUTION A3.1 forward
    p, lse = _row_softmax(_scores(q, k, mask, causal, scale))
    return p @ v, lse
    ### END SOLUTION


@registry.reference("attention.backward")
def attention_backward(gy, q, k, v, y, lse, mask, causal, scale):
    """-> gq, gk, gv (before summing over broadcast batch dims)."""
    ### BEGIN SOLUTION A3.1 backward
    # gv = p^T gy,   gp = gy v^T
    # gs = p * (gp - D),  D = rowsum(gp * p) = rowsum(gy * y)   (the softmax backward; the
    # second form of D needs no T x T product)
    # gq = gs k * scale,   gk = gs^T q * scale
    xp = backend.get_array_module(q)
    p = xp.exp(_scores(q, k, mask, causal, scale) - lse[..., None])
    gv = xp.swapaxes(p, -1, -2) @ gy
    gp = gy @ xp.swapaxes(v, -1, -2)
    gs = p * (gp - (gy * y).sum(axis=-1, keepdims=True))
    scale = q.dtype.type(scale)
    return (gs @ k) * scale, (xp.swapaxes(gs, -1, -2) @ q) * scale, gv
    ### END SOLUTION


def attention_weights(q, k, mask, causal, scale) -> np.ndarray:
    """The (..., Tq, Tk) softmax weights, for plotting (fully masked rows are 0)."""
    return _row_softmax(_scores(q, k, mask, causal, scale))[0]


class ScaledDotProductAttention(Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, *, causal, scale):
        if backend.is_device_array(q):
            # Heads split from one projection are strided views; the device kernel reads
            # contiguous (batch, T, d) blocks. Copied once here and saved, so that the backward
            # does not copy them again (each copy is a launch on a GPU).
            xp = backend.get_array_module(q)
            q, k, v = xp.ascontiguousarray(q), xp.ascontiguousarray(k), xp.ascontiguousarray(v)
        y, lse = registry.call("attention.forward", q, k, v, mask, causal, scale)
        ctx.causal, ctx.scale = causal, scale
        ctx.save_for_backward(q, k, v, mask, y, lse)
        return y

    @staticmethod
    def backward(ctx, gy):
        q, k, v, mask, y, lse = ctx.saved_tensors
        gq, gk, gv = registry.call(
            "attention.backward", gy, q, k, v, y, lse, mask, ctx.causal, ctx.scale
        )
        return unbroadcast(gq, q.shape), unbroadcast(gk, k.shape), unbroadcast(gv, v.shape), None


def _check_shapes(q, k, v, mask) -> None:
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise OpError(
            f"scaled_dot_product_attention: q, k, v need shape (..., T, d); got q {q.shape}, "
            f"k {k.shape}, v {v.shape}"
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise OpError(
            f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit: "
            "need q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv)"
        )
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        if mask is not None:
            scores = (*batch, q.shape[-2], k.shape[-2])
            if np.broadcast_shapes(mask.shape, scores) != scores:
                raise ValueError
    except ValueError:
        raise OpError(
            f"scaled_dot_product_attention: shapes do not broadcast: q {q.shape}, k {k.shape}, "
            f"v {v.shape}" + ("" if mask is None else f", mask {mask.shape}")
        ) from None


def _attention_with_dropout(query, key, value, mask, causal, scale, p) -> Tensor:
    """dropout(softmax(s)) v, composed from other ops: the weights must exist to drop some, and
    the fused path never forms them. Rows that see no key take uniform weights, then are zeroed:
    y = 0 there, as in the fused path, and no NaN."""
    q, k, v = (x if isinstance(x, Tensor) else Tensor(x) for x in (query, key, value))
    tq, tk = q.shape[-2], k.shape[-2]
    xp = backend.get_array_module(q.data)
    # the masks alone, as an additive (..., Tq, Tk) bias: the scores of all-zero q and k
    bias = _scores(xp.zeros((tq, 1), q.dtype), xp.zeros((tk, 1), q.dtype), mask, causal, 1.0)
    live = (bias > -np.inf).any(axis=-1, keepdims=True)  # (..., Tq, 1): sees at least one key
    s = matmul(q, transpose(k, -2, -1)) * scale + bias  # (..., Tq, Tk)
    weights = softmax(where(live, s, 0.0), axis=-1) * live.astype(q.dtype)
    return matmul(dropout(weights, p), v)  # (..., Tq, dv)


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Attention as `torch.nn.functional.scaled_dot_product_attention`, same arguments in the
    same order.

    Args:
        query, key, value: (..., Tq, d), (..., Tk, d), (..., Tk, dv).
        attn_mask: boolean (True = attend) or additive float mask, broadcasting to (..., Tq, Tk).
        dropout_p: dropout on the attention weights, applied whenever > 0 (as in PyTorch: pass
            `p if self.training else 0.0`). Runs the unfused ops, not the fused kernel.
        is_causal: query i attends only to keys j <= i.
        scale: defaults to 1 / sqrt(d).
        return_weights: also return the (..., Tq, Tk) attention weights (no gradient, before
            dropout), to plot.
    """
    mask = None if attn_mask is None else data_of(attn_mask)
    if not (mask is None or isinstance(attn_mask, Tensor) or backend.is_device_array(mask)):
        # host data goes to the query's device; a Tensor stays where it is, and the Function
        # reports one on another device
        mask = backend.to_device(np.asarray(mask), backend.device_of(data_of(query)))
    _check_shapes(query, key, value, mask)
    if mask is not None and mask.dtype != np.bool_:
        mask = mask.astype(query.dtype, copy=False)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if not 0.0 <= dropout_p <= 1.0:
        raise OpError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    if dropout_p > 0.0:
        y = _attention_with_dropout(query, key, value, mask, is_causal, scale, dropout_p)
    else:
        y = ScaledDotProductAttention.apply(query, key, value, mask, causal=is_causal, scale=scale)
    if not return_weights:
        return y
    weights = attention_weights(query.data, key.data, mask, is_causal, scale)
    return y, Tensor._make(weights, None)


def _sample(draw) -> Sample:
    batch = draw.shape(min_dims=1, max_dims=2, max_side=3)
    tq, tk, d, dv = (draw.integers(1, 4) for _ in range(4))
    # each of q, k, v may lack leading dims (all of them: plain (T, d)) or have size-1 ones, and
    # every gradient must sum back to its input's shape
    bq, bk, bv = (broadcastable(draw, batch) for _ in range(3))
    scores = np.broadcast_shapes(bq, bk)  # the mask broadcasts to q k^T (in PyTorch it must)
    causal = bool(draw.integers(0, 1))
    kind = draw.choice([None, "bool", "float"])
    mask = None
    if kind == "bool":  # may mask whole rows: they must come out as zeros, not NaN
        mask = draw.rng.random((*broadcastable(draw, scores), tq, tk)) < 0.7
    elif kind == "float":
        mask = floats(draw, (tq, tk), -1.0, 1.0)
    q, k, v = floats(draw, (*bq, tq, d)), floats(draw, (*bk, tk, d)), floats(draw, (*bv, tk, dv))
    kwargs = {"attn_mask": mask, "is_causal": causal, "scale": draw.choice([None, 0.5, 1.5])}
    return Sample([q, k, v], kwargs)


SPECS = [
    OpSpec(
        "scaled_dot_product_attention",
        scaled_dot_product_attention,
        _sample,
        functions=(ScaledDotProductAttention,),
        primitives=("attention.forward", "attention.backward"),
    )
]
