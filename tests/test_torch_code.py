"""Optional oracle: PyTorch code run as written, once with `torch` and once with `tinyformer`
passed in as the library, on the same float64 inputs: the outputs and the gradients agree.
Skipped when torch is not installed; `.ci/run` installs it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer
import tinyformer.nn.functional as tf_functional

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

LIBRARIES = {"torch": (torch, torch.nn.functional), "tinyformer": (tinyformer, tf_functional)}


def causal_self_attention(lib, F, x, w_qkv, w_out, n_head):
    """nanoGPT's CausalSelfAttention.forward (its manual path), the linear layers as products."""
    B, T, C = x.size()
    q, k, v = (x @ w_qkv).split(C, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)  # (B, nh, T, hs)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    bias = lib.tril(lib.ones(T, T)).view(1, 1, T, T)
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    return y @ w_out


def reductions_by_dim(lib, F, x, w_qkv, w_out, n_head):
    """The reductions and joins PyTorch code writes with dim= and keepdim=."""
    x = x @ w_out + (x @ w_qkv).mean(dim=-1, keepdim=True)
    normed = (x - x.mean(dim=-1, keepdim=True)) / (
        x.var(dim=-1, keepdim=True, correction=0) + 1e-5
    ).sqrt()
    left, right = normed.chunk(2, dim=-1)
    joined = lib.cat((right, left), dim=-1) + lib.stack([x, normed], dim=1).sum(dim=1)
    scores = (
        joined.log_softmax(dim=-1) + F.log_softmax(x, dim=1) - joined.logsumexp(dim=0, keepdim=True)
    )
    return scores.unsqueeze(dim=1).squeeze(dim=1) * x.std(dim=(0, 1), keepdim=True)  # fmt: skip


def llama_feed_forward(lib, F, x, w_qkv, w_out, n_head):
    """A LLaMA-style feed-forward sublayer: RMS norm, a SwiGLU MLP, the residual; then a
    multi-label loss on its output, per element so that the test can square it."""
    h = F.rms_norm(x, (x.size(-1),), eps=1e-6)
    gate, up, _ = (h @ w_qkv).chunk(3, dim=-1)
    y = x + (F.silu(gate) * up) @ w_out
    labels = (x > 0).double()
    return F.binary_cross_entropy_with_logits(y, labels, reduction="none") + y


def tensor_methods(lib, F, x, w_qkv, w_out, n_head):
    """Tensor methods PyTorch code calls by name, each differentiable where PyTorch's is."""
    first, second = x.unbind(dim=0)  # (5, 8) each
    m = first.t() @ second.flip(0)  # (8, 8)
    tiled = m.repeat(2, 1) + w_out[0].expand_as(m.repeat(2, 1))  # (16, 8)
    keep = tiled.gt(0).type_as(tiled) + tiled.le(-1).type_as(tiled) * (w_out.ne(0)).all()
    base = tiled.new_zeros(16, 8) + tiled.new_ones((1, 8))
    return base + tiled * keep @ w_qkv[:, :8].flip((0, 1)) + tiled.eq(tiled.max()).double()


def einsum_attention(lib, F, x, w_qkv, w_out, n_head):
    """Attention written with einsum, as much research code is: heads split by a view, scores
    and the weighted sum of values as named-axis products, the output projection as one too."""
    B, T, C = x.shape
    qkv = lib.einsum("btc,cd->btd", x, w_qkv).view(B, T, 3, n_head, C // n_head)
    q, k, v = qkv.unbind(dim=2)  # (B, T, nh, hs) each
    scores = lib.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(C // n_head)
    att = F.softmax(scores, dim=-1)
    y = lib.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, C)
    return lib.einsum("...c,dc", y, w_out) + lib.einsum("btc,btc->b", x, x)[:, None, None]


def target_log_probs(lib, F, x, w_qkv, w_out, n_head):
    """Each position's log-probability of its target, picked with gather (the cross-entropy
    by hand), and running sums of log-probabilities along the sequence and the vocabulary."""
    logits = x @ w_qkv[:, :8]  # (B, T, V)
    logp = F.log_softmax(logits + x @ w_out, dim=-1)
    target = logits.argmax(dim=-1, keepdim=True)  # (B, T, 1) integers, no gradient
    picked = logp.gather(-1, target)  # (B, T, 1)
    repeats = lib.gather(x, 2, target.expand(2, 5, 8))  # (B, T, C): one feature, 8 times
    return picked.cumsum(dim=1) + lib.cumsum(logp, dim=-1) + repeats


@pytest.mark.parametrize(
    "code",
    [
        causal_self_attention,
        reductions_by_dim,
        llama_feed_forward,
        tensor_methods,
        einsum_attention,
        target_log_probs,
    ],
    ids=lambda f: f.__name__,
)
def test_pytorch_code_runs_as_written_and_agrees(code):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape) for shape in [(2, 5, 8), (8, 24), (8, 8)]]
    results = {}
    for name, (lib, F) in LIBRARIES.items():
        leaves = [lib.tensor(a, requires_grad=True) for a in arrays]
        y = code(lib, F, *leaves, n_head=2)
        (y * y).sum().backward()
        results[name] = [np.asarray(y.detach())] + [np.asarray(t.grad) for t in leaves]
    for ours, theirs in zip(results["tinyformer"], results["torch"]):
        assert ours.dtype == np.float64 and np.allclose(ours, theirs, rtol=1e-10, atol=1e-10)
