"""A3's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself: it gets a `tf` whose `tf.nn.functional` and `tf.ops` are the
student's, run in the task's child process, and raises AssertionError on failure. A module holds
parameters and cannot leave the child: `tf.course.assignments.a3.drivers` builds one there from
a seed and returns its output and projections. `PROPERTIES` and `HIDDEN` map a task id to its tests.

Expected values never come from the student's code alone (a constant function agrees with
itself): the causal scores are compared with q k^T and an explicit lower-triangular mask, and,
when the grader runs the instructor's tree, outputs and gradients with `tf.reference` (the
instructor's tinyformer, run in the grader's process; None in a self-check, where the module is
compared with one call of the student's attention per head instead). Each test calls its own
task's code first, so that a fresh release fails each task on its own stub.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]


def _leaf(tf: ModuleType, a: np.ndarray):
    return tf.Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _like_reference(tf: ModuleType, args: list, kwargs: dict, y, gy=None, grads=()) -> None:
    """The student's attention output y (and gradients of <y, gy> for q, k, v) equal the
    reference's; nothing to compare in a self-check."""
    ref = getattr(tf, "reference", None)
    if ref is None:
        return
    leaves = [ref.Tensor(np.asarray(a, np.float64), requires_grad=True) for a in args]
    want = ref.nn.functional.scaled_dot_product_attention(*leaves, **kwargs)
    np.testing.assert_allclose(y, want.data, rtol=1e-9, atol=1e-12, err_msg="not the reference")
    if gy is not None:
        for name, g, w in zip("qkv", grads, ref.grad(want, leaves, gy)):
            np.testing.assert_allclose(
                g, w, rtol=1e-7, atol=1e-10, err_msg=f"the gradient of {name}"
            )


def _masked_scores(q, k, allowed, scale) -> np.ndarray:
    """q k^T * scale, -inf where `allowed` is False: what the scores must be."""
    return np.where(allowed, (q @ np.swapaxes(k, -1, -2)) * q.dtype.type(scale), -np.inf)


def _qkv(shape_q: tuple[int, ...], tk: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    *batch, tq, d = shape_q
    return [rng.normal(size=s) for s in (shape_q, (*batch, tk, d), (*batch, tk, d + 1))]


def weights_are_distributions_and_y_is_their_average(tf: ModuleType) -> None:
    """Each row of weights sums to 1, y = weights v, and equal scores (q = 0) average v."""
    F = tf.nn.functional

    q, k, v = _qkv((2, 3, 4), 5)
    y, weights = F.scaled_dot_product_attention(
        _leaf(tf, q), _leaf(tf, k), _leaf(tf, v), return_weights=True
    )
    np.testing.assert_allclose(weights.data.sum(axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(y.data, weights.data @ v, atol=1e-12)
    flat = F.scaled_dot_product_attention(_leaf(tf, np.zeros_like(q)), _leaf(tf, k), _leaf(tf, v))
    np.testing.assert_allclose(
        flat.data, np.broadcast_to(v.mean(axis=-2, keepdims=True), flat.shape)
    )
    leaves = [_leaf(tf, a) for a in (q, k, v)]
    y = F.scaled_dot_product_attention(*leaves)
    gy = np.random.default_rng(1).normal(size=y.shape)
    grads = tf.grad(y, leaves, gy)
    _like_reference(tf, [q, k, v], {}, y.data, gy, grads)


def causal_scores_are_a_lower_triangular_mask(tf: ModuleType) -> None:
    """is_causal: query i sees keys j <= i, the same scores as a boolean tril mask."""
    _scores = tf.ops.attention._scores

    q, k, _ = _qkv((2, 3, 4, 5), 4)
    causal = _scores(q, k, None, True, 0.5)
    tril = np.tril(np.ones((4, 4), dtype=bool))
    assert np.isneginf(causal[..., ~tril]).all(), "a future key is not masked"
    np.testing.assert_allclose(causal, _masked_scores(q, k, tril, 0.5), rtol=1e-12)


def causal_scores_keep_dtype_and_other_masks(tf: ModuleType) -> None:
    """The mask keeps float32 scores float32, and combines with a boolean mask (both apply)."""
    _scores = tf.ops.attention._scores

    q, k, _ = (a.astype(np.float32) for a in _qkv((4, 3), 4, seed=1))
    both = _scores(q, k, np.array([True, False, True, True]), True, 1.0)
    assert both.dtype == np.float32, f"float32 scores came back {both.dtype}"
    allowed = np.tril(np.ones((4, 4), dtype=bool)) & np.array([True, False, True, True])
    np.testing.assert_allclose(both, _masked_scores(q, k, allowed, 1.0), rtol=1e-6)


def _reference_projections(ref: ModuleType, x, context, c, nh, seed, context_dim=None):
    """q, k, v and c_proj's weight and bias of the instructor's module made from the driver's
    seed: the inputs of the heads, not taken from the child's word."""
    ref.manual_seed(seed)
    cross = context is not None
    mha = ref.nn.Attention(c, nh, cross=cross, context_dim=context_dim)
    with ref.no_grad():
        if cross:
            q = mha.q_proj(ref.Tensor(x)).data
            k, v = np.split(mha.kv_proj(ref.Tensor(context)).data, 2, axis=-1)
        else:
            q, k, v = np.split(mha.c_attn(ref.Tensor(x)).data, 3, axis=-1)
    bias = mha.c_proj.bias.data if mha.c_proj.bias is not None else np.zeros(c)
    return q, k, v, mha.c_proj.weight.data, bias


def _per_head(tf: ModuleType, x: np.ndarray, context: np.ndarray | None = None, **kw):
    """The student's module on x (from `drivers.py`, run in the grader's child), and
    what it should give: one call of the reference's attention per head on the heads of the
    instructor's projections from the same seed, merged and projected here. In a self-check
    (no reference), the student's attention on the projections the child reports: the
    student's attention in the module's own child could answer anything that agrees with it."""
    ref = getattr(tf, "reference", None)
    F = (ref or tf).nn.functional
    c, nh, seed = kw.pop("embed_dim"), kw.pop("num_heads"), kw.pop("seed")
    module_kw = {"context": context, "context_dim": kw.pop("context_dim", None), **kw}
    y, q, k, v, w, b = tf.course.assignments.a3.drivers.attention_module(
        c, nh, seed, x, **module_kw
    )
    for name, a, shape in (("q", q, x.shape), ("weight", w, (c, c)), ("bias", b, (c,))):
        assert a.shape == shape, f"the module's {name} has shape {a.shape}, not {shape}"
    if ref is not None:
        cdim = module_kw["context_dim"]
        q, k, v, w, b = _reference_projections(ref, x, context, c, nh, seed, cdim)
    hs, own = c // nh, ref or tf
    with own.no_grad():
        heads = [
            F.scaled_dot_product_attention(
                *(
                    own.Tensor(np.ascontiguousarray(a[..., h * hs : (h + 1) * hs]))
                    for a in (q, k, v)
                ),
                **kw,
            ).data
            for h in range(nh)
        ]
    return y, np.concatenate(heads, axis=-1) @ w.T + b  # c_proj, a Linear


def heads_split_into_b_nh_t_hs(tf: ModuleType) -> None:
    """Head h of x (B, T, C) is the channels h hs ... (h + 1) hs, laid out as (B, nh, T, hs)."""
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
    heads = tf.course.assignments.a3.drivers.heads(8, 2, x)
    assert tuple(heads.shape) == (2, 2, 5, 4), f"_heads gave shape {tuple(heads.shape)}"
    np.testing.assert_array_equal(heads, x.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3))


def multi_head_is_one_attention_per_head(tf: ModuleType) -> None:
    """Self-attention with 4 heads equals 4 attention calls on the heads' channels. (No causal
    mask: the expected heads come from the reference's attention, so that A3.2's mask, graded
    on its own, does not cost A3.3's points too.)"""
    x = np.random.default_rng(1).normal(size=(2, 6, 8)).astype(np.float32)
    y, expected = _per_head(tf, x, embed_dim=8, num_heads=4, seed=0)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


PROPERTIES = {
    "A3.1": [weights_are_distributions_and_y_is_their_average],
    "A3.2": [causal_scores_are_a_lower_triangular_mask, causal_scores_keep_dtype_and_other_masks],
    "A3.3": [heads_split_into_b_nh_t_hs, multi_head_is_one_attention_per_head],
}


### BEGIN HIDDEN TESTS A3
def _drawn(tf: ModuleType) -> int:
    """A seed from the test's generator (the grading secret's when grading)."""
    return int(tf.rng.integers(2**31))


def huge_scores_and_fully_masked_rows(tf: ModuleType) -> None:
    """Scores of 1e4 overflow a naive exp; a row that sees no key gives y = 0 and no NaN."""
    F = tf.nn.functional

    q, k, v = (_leaf(tf, a) for a in _qkv((3, 4), 3, seed=_drawn(tf)))
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    y = F.scaled_dot_product_attention(q, k, v, mask, scale=1e4)
    assert np.isfinite(y.data).all(), "attention is not finite for scores of 1e4"
    np.testing.assert_array_equal(y.data[1], 0.0, err_msg="a row with no key must give 0")
    gy = tf.rng.normal(size=y.shape)
    gq, gk, gv = tf.grad(y, [q, k, v], gy)
    for g in (gq, gk, gv):
        assert np.isfinite(g).all(), "the backward is not finite (masked row or huge scores)"
    np.testing.assert_array_equal(gq[1], 0.0, err_msg="a query that sees no key got a gradient")
    args = [q.data, k.data, v.data]
    _like_reference(tf, args, {"attn_mask": mask, "scale": 1e4}, y.data, gy, [gq, gk, gv])


def causal_with_fewer_queries_than_keys(tf: ModuleType) -> None:
    """Tq != Tk: PyTorch's top-left alignment, query i sees keys 0..i."""
    _scores = tf.ops.attention._scores

    q, k, _ = _qkv((2, 3, 4), 5, seed=_drawn(tf))
    tril = np.tril(np.ones((3, 5), dtype=bool))
    np.testing.assert_allclose(_scores(q, k, None, True, 1.0), _masked_scores(q, k, tril, 1.0))


def cross_attention_with_another_length(tf: ModuleType) -> None:
    """Cross-attention from 3 queries to 7 keys: the heads must use each input's own length."""
    rng = tf.rng
    x, context = rng.normal(size=(2, 3, 6)), rng.normal(size=(2, 7, 4))
    x, context = x.astype(np.float32), context.astype(np.float32)
    y, expected = _per_head(
        tf, x, context, embed_dim=6, num_heads=3, seed=_drawn(tf), context_dim=4
    )
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


HIDDEN = {
    "A3.1": [huge_scores_and_fully_masked_rows],
    "A3.2": [causal_with_fewer_queries_than_keys],
    "A3.3": [cross_attention_with_another_length],
}
### END HIDDEN TESTS
