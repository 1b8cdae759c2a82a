"""Fused attention's Numba kernels against the reference: both paths (one thread per (batch,
head) pair for short keys, tiles for long ones), every kind of mask, strided inputs and odd head
sizes, outputs laid out like the inputs, and the size rule that picks the kernel."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from tinyformer import registry

numba = pytest.importorskip("numba")


def _attention(backend, q, k, v, mask, causal, gy):
    scale = 1 / math.sqrt(q.shape[-1])
    with registry.prefer(backend, force=True):  # test sizes are below the kernel's size rule
        y, lse = registry.call("attention.forward", q, k, v, mask, causal, scale)
        grads = registry.call("attention.backward", gy, q, k, v, y, lse, mask, causal, scale)
    return (y, *grads)


def _kernel_matches_reference(q, k, v, mask, gy):
    """Attention's Numba output and gradients equal the reference's, causal and not."""
    for causal in (False, True):
        got = _attention("numba", q, k, v, mask, causal, gy)
        want = _attention("numpy", q, k, v, mask, causal, gy)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)


# Up to SHORT_KEYS keys the kernel runs one thread per (batch, head) pair in blocks of four
# query rows (odd row counts leave a partial block); longer key sequences go through the tiles.
@pytest.mark.parametrize(
    "tq, tk", [(67, 200), (201, 67), (256, 256), (1024, 1024), (1024, 700), (300, 1024)]
)
@pytest.mark.parametrize("mask_kind", [None, "padding", "float"])
def test_attention_kernel_matches_reference_on_both_paths(tq, tk, mask_kind):
    rng = np.random.default_rng(tq + tk)
    q = rng.standard_normal((1, 2, tq, 16))
    k, v = rng.standard_normal((2, 1, tk, 16)), rng.standard_normal((2, 2, tk, 12))
    gy = rng.standard_normal((2, 2, tq, 12))
    mask = None
    if mask_kind == "padding":  # (B, 1, 1, Tk): the last keys of batch 1 are padding
        mask = np.ones((2, 1, 1, tk), bool)
        mask[1, ..., tk // 2 :] = False
        mask = mask & (rng.random((2, 1, tq, 1)) > 0.05)  # and some queries see nothing at all
    elif mask_kind == "float":
        mask = rng.standard_normal((tq, tk))
    _kernel_matches_reference(q, k, v, mask, gy)


@pytest.mark.parametrize("layout", ["heads-last", "reversed", "rows-strided"])
def test_attention_kernel_reads_strided_inputs_and_odd_head_sizes(layout):
    # The short path reads each input as a flat buffer plus strides (attention.rows_of); head
    # sizes 7 and 5 leave a remainder after the products' four-term steps.
    rng = np.random.default_rng(7)
    b, h, t = 3, 2, 37

    def make(d):
        if layout == "heads-last":  # a (B, T, H, d) projection seen as (B, H, T, d), as in GPT
            return rng.standard_normal((b, t, h, d)).transpose(0, 2, 1, 3)
        if layout == "reversed":  # a negative stride: copied before the kernel reads it
            return rng.standard_normal((b, h, t, d))[:, :, ::-1]
        return rng.standard_normal((b, h, t, 2 * d))[..., ::2]  # rows not contiguous: copied

    q, k, v, gy = make(7), make(7), make(5), make(5)
    for causal in (False, True):
        got = _attention("numba", q, k, v, None, causal, gy)
        want = _attention("numpy", q, k, v, None, causal, gy)
        for a, c in zip(got, want):
            np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_attention_kernel_lays_outputs_out_like_its_inputs():
    # Q, K and V sliced out of one (B, T, 3, H, d) projection and seen as (B, H, T, d), as in a
    # transformer: the output comes back as (B, T, H, d) memory, so that the model's transpose
    # and reshape back to (B, T, C) copy nothing, and the gradients as the same slices of one
    # new array, so that split's backward need not concatenate them. Contiguous (B, H, T, d)
    # inputs get contiguous outputs.
    rng = np.random.default_rng(11)
    b, h, t, d = 2, 3, 21, 8
    qkv = rng.standard_normal((b, t, 3, h, d))
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    gy = rng.standard_normal((b, t, h, d)).transpose(0, 2, 1, 3)
    got = _attention("numba", q, k, v, None, True, gy)
    for a, c in zip(got, _attention("numpy", q, k, v, None, True, gy)):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)
    y, *grads = got
    assert y.transpose(0, 2, 1, 3).flags.c_contiguous
    whole = grads[0].base
    assert whole.shape == qkv.shape and all(g.base is whole for g in grads)
    assert [g.strides for g in grads] == [a.strides for a in (q, k, v)]
    for i, g in enumerate(grads):
        assert np.shares_memory(g, whole[:, :, i])
    plain = [np.ascontiguousarray(a) for a in (q, k, v, gy)]
    assert all(a.flags.c_contiguous for a in _attention("numba", *plain[:3], None, True, plain[3]))
    # Q and K the same slice: the gradients must not share memory (written one after the other)
    y, *grads = _attention("numba", q, q, v, None, True, gy)
    assert not any(np.shares_memory(a, c) for a, c in [grads[:2], grads[1:], grads[::2]])
    # Q, K and V interleaved element by element in one array: rows not contiguous, so the
    # gradients cannot mirror them (the kernels write rows as contiguous runs)
    mixed = rng.standard_normal((b, t, h, d, 3))
    q, k, v = (mixed[..., i].transpose(0, 2, 1, 3) for i in range(3))
    for a, c in zip(
        _attention("numba", q, k, v, None, True, gy), _attention("numpy", q, k, v, None, True, gy)
    ):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_self_attention_gradients_through_one_qkv_array(monkeypatch):
    # Attention's c_attn -> split -> heads -> attention kernel: the kernel hands back
    # dQ, dK and dV as slices of one array, and split's backward returns that array uncopied.
    # Every gradient must equal the reference path's.
    import tinyformer as tf
    from tinyformer import nn

    split_op = importlib.import_module("tinyformer.ops.split")  # the module, not the function
    uncopied = []

    def spy(gys, axis, shape):
        whole = side_by_side(gys, axis, shape)
        uncopied.append(whole is not None)
        return whole

    side_by_side = split_op._side_by_side
    monkeypatch.setattr(split_op, "_side_by_side", spy)
    tf.manual_seed(4)
    mha = nn.Attention(16, 4).to(np.float64)
    x = tf.randn(3, 10, 16, dtype=np.float64, requires_grad=True)
    grads = {}
    for backend in ("numba", "numpy"):
        with registry.prefer(backend, force=True):
            mha.zero_grad()
            x.grad = None
            (mha(x, is_causal=True) ** 2).sum().backward()
        grads[backend] = [x.grad, *(p.grad for p in mha.parameters())]
    assert uncopied == [True, False]  # the reference's gradients are three separate arrays
    for a, c in zip(*grads.values()):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def test_split_backward_joins_without_copying_only_pieces_side_by_side():
    side_by_side = importlib.import_module("tinyformer.ops.split")._side_by_side
    whole = np.arange(24.0).reshape(2, 3, 4)
    pieces = [whole[..., :1], whole[..., 1:3], whole[..., 3:]]
    joined = side_by_side(pieces, 2, (2, 3, 4))
    assert np.shares_memory(joined, whole) and np.array_equal(joined, whole)
    assert side_by_side(pieces[::-1], 2, (2, 3, 4)) is None  # out of order
    assert side_by_side([p.copy() for p in pieces], 2, (2, 3, 4)) is None  # separate arrays
    assert side_by_side([whole[:1], whole[1:]], 0, (2, 3, 4)) is not None
    assert side_by_side([whole[:, :1], whole[:, 1:]], 2, (2, 3, 4)) is None  # not along axis 2


@pytest.mark.parametrize(
    "batch, tq, tk, causal, runs",
    [
        ((2, 1), 128, 128, False, "numba"),  # 2**15 scores, two pairs
        ((1, 2), 128, 127, False, "numpy"),  # one score short of 2**15
        ((1, 1), 256, 256, False, "numpy"),  # short keys, one pair: one thread against BLAS's two
        ((1, 1), 256, 256, True, "numba"),  # but causal it computes half the scores
        ((1, 1), 128, 128, True, "numpy"),  # causal, one pair, under 2**15 scores
        ((1, 1), 64, 512, False, "numba"),  # long keys: tiled, every core helps with one pair too
    ],
)
def test_attention_default_dispatch_follows_the_size_rule(batch, tq, tk, causal, runs):
    q, k = np.zeros((*batch, tq, 8), np.float32), np.zeros((*batch, tk, 8), np.float32)
    y, lse = np.zeros((*batch, tq, 8), np.float32), np.zeros((*batch, tq), np.float32)
    assert registry.choose("attention.forward", q, k, k, None, causal, 1.0).backend == runs
    backward = registry.choose("attention.backward", y, q, k, k, y, lse, None, causal, 1.0)
    assert backward.backend == runs


@pytest.mark.parametrize("d, dv", [(128, 128), (129, 8), (8, 129), (5, 3)])
def test_attention_kernel_head_sizes_on_both_paths(d, dv):
    # The short kernel's scratch rows hold up to SHORT_HEAD (128) features; larger heads go
    # through the tiles. Head sizes that are not a multiple of 4 leave a remainder of terms.
    from tinyformer.kernels.numba import attention as kernel_module

    rng = np.random.default_rng(d * 1000 + dv)
    q, k = rng.standard_normal((2, 3, 21, d)), rng.standard_normal((2, 3, 21, d))
    v, gy = rng.standard_normal((2, 3, 21, dv)), rng.standard_normal((2, 3, 21, dv))
    assert kernel_module.short(q, k, v) == (max(d, dv) <= 128)
    _kernel_matches_reference(q, k, v, None, gy)


def test_attention_kernels_compile_once_for_read_only_and_writeable_inputs():
    # Numba types read-only arrays (broadcast_to views, many gradients) apart from writeable
    # ones; the wrappers pass every input as read-only so that a mix compiles no new variant.
    from tinyformer.kernels.numba import _attention_short as short

    rng = np.random.default_rng(3)
    q, k, v, gy = (rng.standard_normal((2, 2, 9, 4)) for _ in range(4))
    _attention("numba", q, k, v, None, True, gy)
    counts = len(short.pairs_forward.signatures), len(short.pairs_backward.signatures)
    frozen = [np.broadcast_to(a, a.shape) for a in (q, k, v, gy)]  # read-only views
    got = _attention("numba", *frozen[:3], None, True, frozen[3])
    assert (len(short.pairs_forward.signatures), len(short.pairs_backward.signatures)) == counts
    for a, c in zip(got, _attention("numpy", q, k, v, None, True, gy)):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)


def _mask_layouts(rng, tq, tk):
    """Masks for (2, 2, tq, tk) scores in the layouts a caller may hand over."""
    keep = rng.random((2, 2, tq, tk)) > 0.2
    bias = rng.standard_normal((2, 2, tq, tk))
    return {
        "keep, contiguous": keep,
        "keep, over keys only (B, 1, 1, Tk)": keep[:, :1, :1],
        "keep, over queries only (Tq, 1)": keep[0, 0, :, :1],
        "keep, reversed keys": keep[..., ::-1],
        "bias, contiguous": bias,
        "bias, one per head, broadcast over batch": bias[0],
        "bias, every other key": np.repeat(bias, 2, axis=-1)[..., ::2],
        "bias, transposed": bias.transpose(0, 1, 3, 2).copy().transpose(0, 1, 3, 2),
    }


@pytest.mark.parametrize("tk", [19, 300])  # the short path and the tiles
def test_attention_kernels_read_every_mask_layout_and_compile_once_per_dtype(tk):
    # The kernels take each mask as a flat buffer with a start per (batch, head) pair and a row
    # step: a contiguous mask, a broadcast one and none at all are one Numba type, so the
    # kernels compile once per dtype (each compile costs seconds), and none is copied but those
    # whose keys are not contiguous.
    from tinyformer.kernels.numba import _attention_short as short
    from tinyformer.kernels.numba import attention as tiles

    def compiled():
        kernels = (short.pairs_forward, short.pairs_backward)
        kernels += (tiles._softmax_tile, tiles._softmax_grad_tile)
        return [len(k.signatures) for k in kernels]

    rng = np.random.default_rng(tk)
    tq = 11
    q, k, v = (rng.standard_normal((2, 2, t, 8)) for t in (tq, tk, tk))
    gy = rng.standard_normal((2, 2, tq, 8))
    _attention("numba", q, k, v, None, False, gy)  # compiles (or loads) float64
    before = compiled()
    for name, mask in _mask_layouts(rng, tq, tk).items():
        for causal in (False, True):
            got = _attention("numba", q, k, v, mask, causal, gy)
            want = _attention("numpy", q, k, v, mask, causal, gy)
            for a, c in zip(got, want):
                np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10, err_msg=name)
    assert compiled() == before, "a mask layout compiled a kernel of its own"
