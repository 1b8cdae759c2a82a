"""clip_grad_norm_ over all gradients at once ("clip_grad_norm.many"): on a device two CUDA
launches clip every gradient, checked here on the fake device's CPU emulator against the NumPy
reference; gradients the kernels cannot scale in place take the reference."""

from __future__ import annotations

import numpy as np
import pytest

from tinyformer import registry
from tinyformer.fake_device import to_fake
from tinyformer.kernels.cuda import clip as cuda_clip
from tinyformer.launches import counting
from tinyformer.nn.utils.clip import clip_grad_norm_many as reference

# One element, around a warp, past a block, an empty one, matrices, and past one work item.
SHAPES = [(1,), (31,), (257,), (0,), (3, 7), (2, 2, 5), (600,)]
TOLERANCES = [(np.float32, 1e-6), (np.float64, 1e-13)]


def _grads(dtype, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _kernel(grads, **kwargs):
    fake = [to_fake(g) for g in grads]
    with registry.prefer("cuda", force=True), counting() as launches:
        total = registry.call("clip_grad_norm.many", fake, **kwargs)
    return float(total), [g.get() for g in fake], launches


@pytest.mark.parametrize("dtype, rtol", TOLERANCES)
@pytest.mark.parametrize("max_norm", [0.5, 1e6])  # clipped, and left alone
def test_two_launches_clip_like_the_reference(dtype, rtol, max_norm, monkeypatch):
    monkeypatch.setattr(cuda_clip, "MIN_CHUNK", 256)  # several items in one gradient
    grads = _grads(dtype)
    want = [g.copy() for g in grads]
    want_total = float(reference(want, max_norm=max_norm, eps=1e-6))
    total, got, launches = _kernel(grads, max_norm=max_norm, eps=1e-6)
    assert launches.by_kind()["kernel"] == 2 and launches.total == 2
    assert total == pytest.approx(want_total, rel=rtol)
    exact = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
    assert total == pytest.approx(exact, rel=1e-14)  # summed in double
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=0)
    if max_norm > total:  # a scale of exactly 1: the bits are untouched
        for g, original in zip(got, grads):
            np.testing.assert_array_equal(g, original)


def test_the_work_items_stay_few_for_large_gradients():
    for sizes in ([10**6, 3, 10**7], [5] * 200, [123_456_789]):
        chunk = cuda_clip.chunk_size(sum(sizes))
        assert chunk % cuda_clip.THREADS == 0 and chunk >= cuda_clip.MIN_CHUNK
        assert sum(-(-s // chunk) for s in sizes) <= cuda_clip.MOST_ITEMS + len(sizes)


def test_gradients_it_cannot_scale_in_place_take_the_reference():
    grads = _grads(np.float32, [(4, 6), (5,)])
    fake = [to_fake(grads[0]).T, to_fake(grads[1])]  # a transposed view: not contiguous
    with registry.prefer("cuda", force=True), counting() as launches:
        total = registry.call("clip_grad_norm.many", fake, max_norm=0.1, eps=1e-6)
    assert launches.by_kind()["kernel"] == 0
    want = [g.copy() for g in grads]
    want_total = reference([want[0].T, want[1]], max_norm=0.1, eps=1e-6)
    assert float(total) == float(want_total)
    np.testing.assert_array_equal(fake[1].get(), want[1])


def test_all_empty_gradients_give_a_norm_of_zero():
    total, got, launches = _kernel(_grads(np.float32, [(0,), (0, 3)]), max_norm=1.0, eps=1e-6)
    assert total == 0.0 and launches.by_kind()["kernel"] == 0
