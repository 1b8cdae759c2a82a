"""PyTorch's Tensor methods and functions added in torch_methods.py, torch_functions_more.py and
creation_more.py: values against NumPy, gradients by finite differences (float64), and the
errors for bad input. tests/test_torch_tensor_extras_oracle.py compares the same names with
PyTorch itself; tests/test_torch_settings.py tests torch_settings.py."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf

RNG = np.random.default_rng(0)


def _t(shape, requires_grad=True, low=-2.0, high=2.0):
    return tf.tensor(RNG.uniform(low, high, shape), dtype="float64", requires_grad=requires_grad)


# -- what the array says ---------------------------------------------------------------------


def test_stride_contiguity_and_element_size_read_the_array():
    x = tf.zeros(2, 3, 4)
    assert x.stride() == (12, 4, 1) and x.stride(1) == 4 and x.stride(-1) == 1
    assert x.is_contiguous() and not x.is_cuda and x.element_size() == 4
    assert x.transpose(0, 2).stride() == (1, 4, 12) and not x.transpose(0, 2).is_contiguous()
    assert x[0].expand(5, 3, 4).stride() == (0, 4, 1)
    assert tf.zeros(3, dtype=tf.int64).element_size() == 8
    assert tf.zeros(3, dtype=tf.bool).element_size() == 1
    with pytest.raises(IndexError, match=r"stride: dim 3 is out of range for shape \(2, 3, 4\)"):
        x.stride(3)


def test_is_cuda_is_false_on_other_devices():
    assert not tf.zeros(2).to("fake").is_cuda


def test_to_accepts_non_blocking_and_copy():
    x = _t((2, 3))
    assert x.to("cpu", non_blocking=True) is x
    assert x.to(tf.float64, False) is x  # PyTorch's positional non_blocking
    for copied in (x.to(copy=True), x.to(tf.float64, False, True), x.to("cpu", copy=True)):
        assert copied is not x and np.array_equal(copied.data, x.data)
        assert not np.shares_memory(copied.data, x.data)
    y = x.to(tf.float32, non_blocking=True)
    assert y.dtype == np.float32
    x.to(copy=True).sum().backward()  # the copy is differentiable, as PyTorch's
    assert np.array_equal(x.grad, np.ones((2, 3)))


# -- math ------------------------------------------------------------------------------------


def test_square_reciprocal_and_logs_values_and_dtypes():
    a = RNG.uniform(0.1, 5.0, (3, 4))
    x = tf.tensor(a, dtype="float64")
    assert np.array_equal(x.square().data, a * a)
    assert np.array_equal(tf.reciprocal(x).data, 1 / a)
    np.testing.assert_allclose(x.log2().data, np.log2(a), rtol=1e-15)
    np.testing.assert_allclose(tf.log10(x).data, np.log10(a), rtol=1e-15)
    ints = tf.tensor([1, 2, 4], dtype=tf.int32)
    assert tf.square(ints).dtype == np.int32 and tf.square(tf.tensor([True])).dtype == np.int64
    assert ints.reciprocal().dtype == np.float32 and ints.log2().dtype == np.float32


def test_logs_are_exact_where_the_answer_is_a_whole_number():
    # log(x) / ln 2 alone gives 2.9999998 for log2(8) in float32, 2.9999999999999996 for
    # log10(1000) in float64
    for dtype in ("float32", "float64"):
        powers = tf.tensor([2.0**k for k in range(-20, 21)], dtype=dtype)
        assert np.array_equal(powers.log2().data, np.arange(-20, 21))
        tens = tf.tensor([10.0**k for k in range(-5, 8)], dtype=dtype)
        assert np.array_equal(tens.log10().data, np.arange(-5, 8))
    with np.errstate(divide="ignore", invalid="ignore"):
        special = tf.tensor([0.0, -1.0, np.inf]).log2().data
    assert special[0] == -np.inf and np.isnan(special[1]) and special[2] == np.inf


@pytest.mark.parametrize("name", ["square", "reciprocal", "log2", "log10"])
def test_elementwise_gradients(name):
    x = _t((3, 4), low=0.5, high=3.0)
    assert tf.gradcheck(lambda t: getattr(t, name)(), [x])
    assert tf.gradcheck(lambda t: getattr(tf, name)(t), [x])


def test_lerp_values_gradients_and_exact_end():
    a, b = _t((2, 3)), _t((2, 3))
    span = b.data - a.data
    assert np.array_equal(a.lerp(b, 0.25).data, a.data + 0.25 * span)
    assert np.array_equal(a.lerp(b, 0.75).data, b.data - span * 0.25)  # PyTorch's formula there
    # from end backwards: weight 1 gives end exactly (0.1 + (1e-17 - 0.1) would be 0)
    start, end = tf.tensor([0.1, -3.0], dtype="float64"), tf.tensor([1e-17, 1e-20], dtype="float64")
    assert tf.lerp(start, end, 1.0).data.tolist() == [1e-17, 1e-20]
    # the formula per element by |weight| (the two differ in the last bit for about 1 in 5)
    p, q, r = _t((200,), False), _t((200,), False), _t((200,), False, -1.5, 1.5)
    gap = q.data - p.data
    near = np.abs(r.data) < 0.5
    expected = np.where(near, p.data + r.data * gap, q.data - gap * (1 - r.data))
    assert np.array_equal(tf.lerp(p, q, r).data, expected)
    w = tf.tensor([[0.1, 0.6, 1.0], [-0.7, 0.4, 1.5]], dtype="float64", requires_grad=True)
    assert tf.gradcheck(lambda s, e, t: s.lerp(e, t), [a, b, w])
    assert tf.gradcheck(lambda s, e: tf.lerp(s, e, 0.8), [a, b])
    with pytest.raises(TypeError, match="lerp: expected end of dtype float64, got float32"):
        a.lerp(tf.zeros(2, 3), 0.5)


# -- products --------------------------------------------------------------------------------


def test_dot_mv_mm_values_and_gradients():
    m, n, v, w = _t((3, 4)), _t((4, 2)), _t((4,)), _t((4,))
    np.testing.assert_allclose(v.dot(w).data, v.data @ w.data, rtol=1e-14)
    assert tf.dot(v, w).shape == ()
    np.testing.assert_allclose(tf.mv(m, v).data, m.data @ v.data, rtol=1e-14)
    np.testing.assert_allclose(m.mm(n).data, m.data @ n.data, rtol=1e-14)
    assert tf.gradcheck(tf.dot, [v, w]) and tf.gradcheck(tf.mv, [m, v])
    assert tf.gradcheck(lambda a, b: a.mm(b), [m, n])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tf.dot(tf.zeros(3), tf.zeros(4)), r"dot: vectors of lengths 3 and 4"),
        (lambda: tf.dot(tf.zeros(3, 1), tf.zeros(3)), r"dot: input must be a vector .*\(3, 1\)"),
        (lambda: tf.mv(tf.zeros(2, 3), tf.zeros(2)), r"mv: a matrix \(2, 3\) cannot multiply"),
        (lambda: tf.mv(tf.zeros(3), tf.zeros(3)), r"mv: input must be a matrix .*\(3,\)"),
        (lambda: tf.mm(tf.zeros(2, 3), tf.zeros(2, 3)), r"mm: shapes \(2, 3\) and \(2, 3\)"),
        (lambda: tf.mm(tf.zeros(2, 3, 1), tf.zeros(1, 3)), r"mm: input must be a matrix"),
    ],
)
def test_products_name_the_bad_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_products_refuse_mixed_dtypes():
    with pytest.raises(TypeError, match="dot: expected both operands of one dtype"):
        tf.dot(tf.zeros(3), tf.zeros(3, dtype=tf.float64))


# -- shapes ----------------------------------------------------------------------------------


def test_masked_select_broadcasts_and_differentiates():
    x = _t((2, 3))
    mask = np.array([True, False, True])
    expected = x.data[np.broadcast_to(mask, (2, 3))]
    assert np.array_equal(x.masked_select(tf.tensor(mask)).data, expected)
    assert np.array_equal(tf.masked_select(x, mask).data, expected)
    column = tf.tensor([[True], [False]])
    assert np.array_equal(tf.masked_select(x[0], column).data, x.data[0])
    assert tf.gradcheck(lambda t: t.masked_select(tf.tensor(mask)), [x])
    with pytest.raises(TypeError, match="masked_select: mask must be boolean, got int64"):
        x.masked_select(tf.tensor([1, 0, 1]))
    with pytest.raises(ValueError, match=r"mask of shape \(2,\) does not broadcast with \(2, 3\)"):
        x.masked_select(tf.tensor([True, False]))


@pytest.mark.parametrize(
    ("source", "destination"), [(0, -1), (-1, 0), ((0, 1), (2, 0)), ([2, 0], [0, 1]), (1, 1)]
)
def test_movedim_is_numpys_moveaxis(source, destination):
    x = _t((2, 3, 4))
    expected = np.moveaxis(x.data, source, destination)
    assert np.array_equal(x.movedim(source, destination).data, expected)
    assert np.array_equal(tf.moveaxis(x, source, destination).data, expected)
    assert tf.gradcheck(lambda t: tf.movedim(t, source, destination), [x])


def test_movedim_and_swapaxes_errors():
    x = tf.zeros(2, 3)
    with pytest.raises(IndexError, match=r"movedim: dim 2 is out of range .* \(2, 3\)"):
        x.movedim(2, 0)
    with pytest.raises(ValueError, match="movedim: 2 source dims but 1 destination dims"):
        x.movedim((0, 1), (0,))
    with pytest.raises(ValueError, match="movedim: repeated dim"):
        x.movedim((0, 0), (0, 1))
    with pytest.raises(IndexError, match=r"swapaxes: dim -3 is out of range"):
        x.swapaxes(-3, 0)


def test_swapaxes_unflatten_tile_flips_and_broadcast_to():
    x = _t((2, 3, 4))
    assert np.array_equal(tf.swapaxes(x, 0, 2).data, np.swapaxes(x.data, 0, 2))
    assert np.array_equal(x.swapdims(1, -1).data, np.swapaxes(x.data, 1, -1))
    assert x.unflatten(2, (2, -1)).shape == (2, 3, 2, 2)
    assert np.array_equal(tf.unflatten(x, 1, (3, 1)).data, x.data.reshape(2, 3, 1, 4))
    for reps in ((2,), (2, 1, 1), (3, 1, 2, 1)):
        assert np.array_equal(x.tile(reps).data, np.tile(x.data, reps))
    m = x[0]
    assert np.array_equal(m.fliplr().data, np.fliplr(m.data))
    assert np.array_equal(tf.flipud(m).data, np.flipud(m.data))
    assert np.array_equal(tf.broadcast_to(m, (5, -1, 4)).data, np.broadcast_to(m.data, (5, 3, 4)))
    for fn in (
        lambda t: t.swapaxes(0, 2), lambda t: t.unflatten(2, (2, 2)), lambda t: t.tile((2, 1)),
        lambda t: t.fliplr(), lambda t: t.flipud(), lambda t: tf.broadcast_to(t, (2, 2, 3, 4)),
    ):  # fmt: skip
        assert tf.gradcheck(fn, [x])


def test_shape_errors_name_the_shape():
    with pytest.raises(
        ValueError, match=r"unflatten: sizes \(5, -1\) do not fill dim 1 of length 12"
    ):
        tf.zeros(2, 12).unflatten(1, (5, -1))
    with pytest.raises(ValueError, match=r"unflatten: sizes \(-1, -1\)"):
        tf.zeros(2, 12).unflatten(1, (-1, -1))
    with pytest.raises(ValueError, match=r"fliplr: needs at least 2 axes, got shape \(3,\)"):
        tf.zeros(3).fliplr()
    with pytest.raises(ValueError, match="flipud: needs at least 1 axis"):
        tf.flipud(tf.tensor(1.0))


def test_hstack_vstack_are_numpys_and_differentiable():
    a, b, s = _t((2, 3)), _t((2, 1)), _t(())
    assert np.array_equal(tf.hstack([a, b]).data, np.hstack([a.data, b.data]))
    assert np.array_equal(tf.hstack([s, a[0]]).data, np.hstack([s.data, a.data[0]]))
    assert np.array_equal(tf.vstack([a, a[1]]).data, np.vstack([a.data, a.data[1]]))
    assert tf.vstack([s, s]).shape == (2, 1)
    assert tf.gradcheck(lambda p, q: tf.hstack([p, q]), [a, b])
    assert tf.gradcheck(lambda p, q: tf.vstack((p, q[1], p[0])), [a, a])
    with pytest.raises(TypeError, match="hstack: expects a non-empty list or tuple of tensors"):
        tf.hstack(a)


# -- data without gradients ------------------------------------------------------------------


def test_unique_and_its_refusal_of_dim():
    a = np.array([[3, 1, 2], [1, 3, 3]])
    values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    out = tf.unique(tf.tensor(a), return_inverse=True, return_counts=True)
    assert [o.data.tolist() for o in out] == [
        values.tolist(), inverse.reshape(a.shape).tolist(), counts.tolist()
    ]  # fmt: skip
    assert out[1].dtype == np.int64 and out[2].dtype == np.int64
    assert np.array_equal(tf.tensor(a).unique(sorted=False).data, values)
    assert not tf.unique(_t((4,))).requires_grad
    with pytest.raises(NotImplementedError, match=r"unique: dim=0 .* is not supported"):
        tf.unique(tf.tensor(a), dim=0)


def test_count_nonzero_nan_to_num_and_logical():
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    x = tf.tensor(a)
    assert x.count_nonzero().item() == 3 and x.count_nonzero().dtype == np.int64
    assert tf.count_nonzero(x, dim=0).data.tolist() == [1, 1, 1]
    assert tf.count_nonzero(x, dim=(0, 1)).item() == 3
    bad = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    assert np.array_equal(tf.nan_to_num(tf.tensor(bad)).data, np.nan_to_num(bad))
    assert tf.tensor(bad).nan_to_num(1.0, 2.0, -3.0).data.tolist() == [1.0, 2.0, -3.0, 1.0]
    assert tf.nan_to_num(tf.tensor([1, 2])).data.tolist() == [1, 2]
    y = tf.tensor(bad.astype(np.float64), requires_grad=True)
    y.nan_to_num().sum().backward()
    assert y.grad.tolist() == [0.0, 0.0, 0.0, 1.0]  # the replaced elements get none
    p, q = np.array([1.0, 0.0, 2.0, 0.0]), np.array([3, 3, 0, 0])
    for name in ("logical_and", "logical_or", "logical_xor"):
        expected = getattr(np, name)(p, q)
        assert np.array_equal(getattr(tf, name)(tf.tensor(p), tf.tensor(q)).data, expected)
        assert getattr(tf.tensor(p), name)(q).dtype == np.bool_
    assert tf.logical_not(tf.tensor(p)).data.tolist() == [False, True, False, True]


def test_bincount_values_dtypes_and_errors():
    i = np.array([0, 1, 1, 4])
    assert np.array_equal(tf.bincount(tf.tensor(i)).data, np.bincount(i))
    assert tf.bincount(tf.tensor(i), minlength=7).shape == (7,)
    w32 = tf.tensor([0.5, 1.0, 2.0, 3.0])
    assert tf.bincount(tf.tensor(i), weights=w32).dtype == np.float32
    assert tf.bincount(tf.tensor(i), weights=tf.tensor([1, 2, 3, 4])).dtype == np.float64
    assert tf.bincount(tf.tensor(i), w32).data.tolist() == [0.5, 3.0, 0.0, 0.0, 3.0]
    with pytest.raises(ValueError, match="bincount: input must be 1-D non-negative .*minimum -1"):
        tf.bincount(tf.tensor([1, -1]))
    with pytest.raises(ValueError, match=r"bincount: input must .* of shape \(2, 2\)"):
        tf.bincount(tf.tensor([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match=r"weights of shape \(3,\) do not match input's \(4,\)"):
        tf.bincount(tf.tensor(i), tf.tensor([1.0, 2.0, 3.0]))


def test_searchsorted_and_bucketize_are_numpys_searchsorted():
    seq, values = np.array([1, 3, 5, 7]), np.array([[3, 6], [9, 0]])
    for side in ("left", "right"):
        expected = np.searchsorted(seq, values, side=side)
        out = tf.searchsorted(tf.tensor(seq), tf.tensor(values), side=side)
        assert np.array_equal(out.data, expected) and out.dtype == np.int64
        assert np.array_equal(tf.bucketize(values, seq, right=side == "right").data, expected)
    rows = np.array([[1, 3, 5, 7], [2, 4, 6, 8]])
    out = tf.searchsorted(rows, values, right=True, out_int32=True)
    assert out.data.tolist() == [[2, 3], [4, 0]] and out.dtype == np.int32
    assert tf.searchsorted(seq, 4).shape == () and tf.searchsorted(seq, 4).item() == 2
    order = np.array([1, 2, 0])
    assert tf.searchsorted(np.array([5, 1, 3]), np.array([2, 4]), sorter=order).data.tolist() == [
        1, 2
    ]  # fmt: skip
    with pytest.raises(ValueError, match="searchsorted: side='left' and right=True"):
        tf.searchsorted(seq, values, right=True, side="left")
    with pytest.raises(ValueError, match=r"shape \(2, 4\) needs values with the same leading"):
        tf.searchsorted(rows, np.array([1, 2]))
    with pytest.raises(ValueError, match=r"bucketize: boundaries must be 1-D, got shape \(2, 4\)"):
        tf.bucketize(values, rows)


def test_diff_is_numpys_and_differentiable():
    a = _t((3, 5))
    for n, dim in ((1, -1), (2, 1), (1, 0), (4, 1), (7, 1)):
        assert np.array_equal(tf.diff(a, n, dim).data, np.diff(a.data, n, axis=dim))
    pre, post = _t((3, 1)), _t((3, 2))
    expected = np.diff(a.data, 2, axis=1, prepend=pre.data, append=post.data)
    assert np.array_equal(tf.diff(a, 2, prepend=pre, append=post).data, expected)
    assert tf.diff(tf.tensor([True, False, False])).data.tolist() == [True, False]
    assert tf.gradcheck(lambda t, p, q: tf.diff(t, 2, 1, prepend=p, append=q), [a, pre, post])
    with pytest.raises(ValueError, match=r"diff: dim 2 is out of range .* \(3, 5\)"):
        tf.diff(a, dim=2)


def test_cumprod_values_and_gradient_through_zeros_and_negatives():
    a = np.array([[0.0, 2.0, -3.0, 1.5], [1.0, 0.0, 4.0, 0.0], [-1.0, -2.0, 0.5, 3.0]])
    x = tf.tensor(a, requires_grad=True)
    for dim in (0, 1, -1):
        assert np.array_equal(tf.cumprod(x, dim).data, np.cumprod(a, axis=dim))
        assert np.array_equal(tf.cumprod(x.detach(), dim).data, np.cumprod(a, axis=dim))
        assert tf.gradcheck(lambda t, d=dim: tf.cumprod(t, d), [x])  # exp(cumsum(log)) fails
    assert tf.cumprod(tf.tensor([1, 2, 3], dtype=tf.int32), 0).dtype == np.int64
    assert tf.cumprod(tf.tensor(3.0), 0).item() == 3.0
    assert tf.cumprod(tf.zeros(2, 0), 1).shape == (2, 0)
    with pytest.raises(ValueError, match=r"cumprod: dim 2 is out of range .* \(3, 4\)"):
        tf.cumprod(x, 2)


# -- creation ---------------------------------------------------------------------------------


def test_new_full_new_empty_empty_like():
    x = tf.zeros(2, dtype=tf.int32)
    full = x.new_full((2, 3), 7)
    assert full.dtype == np.int32 and full.data.tolist() == [[7, 7, 7]] * 2
    assert x.new_full([4], 1.5, dtype=tf.float64).data.tolist() == [1.5] * 4
    assert x.new_empty(2, 3).shape == (2, 3) and x.new_empty((3,)).dtype == np.int32
    assert x.new_full((1,), 1.0, dtype=tf.float32, requires_grad=True).requires_grad
    like = tf.empty_like(_t((2, 3)))
    assert like.dtype == np.float64 and like.shape == (2, 3) and not like.data.any()


def test_randint_like_normal_and_logspace():
    x = tf.zeros(50, 40)
    tf.manual_seed(3)
    draws = tf.randint_like(x, 2, 5)
    assert draws.dtype == np.float32 and set(np.unique(draws.data)) == {2.0, 3.0, 4.0}
    tf.manual_seed(3)
    assert np.array_equal(tf.randint_like(x, 2, 5).data, draws.data)  # the seed's numbers
    assert tf.randint_like(x, 3, dtype=tf.int64).data.max() <= 2
    g = tf.Generator().manual_seed(0)
    n = tf.normal(2.0, 3.0, size=(200, 200), generator=g)
    assert n.dtype == np.float32 and abs(n.data.mean() - 2) < 0.05 and abs(n.data.std() - 3) < 0.05
    m = tf.normal(tf.zeros(3, 1, dtype=tf.float64), tf.tensor([1.0, 0.0, 2.0]))
    assert m.shape == (3, 3) and m.dtype == np.float64 and not m.data[:, 1].any()
    assert tf.normal(tf.ones(4), 0.0).data.tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="normal: std must be >= 0"):
        tf.normal(0.0, -1.0, size=(2,))
    with pytest.raises(TypeError, match="normal: mean must be a floating tensor, got int64"):
        tf.normal(tf.tensor([1, 2]), 1.0)
    np.testing.assert_allclose(tf.logspace(0, 2, 5).data, 10 ** np.linspace(0, 2, 5), rtol=1e-6)
    assert tf.logspace(0, 3, 4, base=2).data.tolist() == [1.0, 2.0, 4.0, 8.0]
    assert tf.logspace(1, 2, 1).data.tolist() == [10.0]


# -- devices ----------------------------------------------------------------------------------

ON_DEVICE = {
    "bincount": lambda d: tf.bincount(d(np.array([0, 1, 1, 3])), d(np.array([1.0, 2, 3, 4]))),
    "searchsorted": lambda d: tf.searchsorted(d(np.array([[1.0, 3], [2, 4]])), d(np.ones((2, 1)))),
    "sorter": lambda d: tf.searchsorted(
        d(np.array([5, 1, 3])), d(np.array([2, 4])), sorter=d(np.array([1, 2, 0]))
    ),  # fmt: skip
    "bucketize": lambda d: tf.bucketize(d(np.array([2.0, 4.0])), d(np.array([1.0, 3.0, 5.0]))),
    "hstack": lambda d: tf.hstack([d(np.ones((2, 2))), d(np.zeros((2, 1)))]),
    "diff": lambda d: tf.diff(d(np.array([1.0, 4.0, 9.0, 16.0])), 2),
    "cumprod": lambda d: tf.cumprod(d(np.array([[1.0, -2.0], [0.5, 3.0]])).requires_grad_(), 1),
    "log2": lambda d: tf.log2(d(np.array([1, 2, 6]))),
    "unique": lambda d: tf.unique(d(np.array([3, 1, 3])), return_inverse=True)[1],
    "nan_to_num": lambda d: tf.nan_to_num(d(np.array([np.nan, np.inf, 2.0]))),
    "normal": lambda d: tf.normal(d(np.zeros(3)), 0.0),
    "randint_like": lambda d: tf.randint_like(d(np.zeros(3)), 1),
}


@pytest.mark.parametrize("name", sorted(ON_DEVICE))
def test_functions_compute_on_the_tensors_device(name):
    host = ON_DEVICE[name](tf.tensor)
    device = ON_DEVICE[name](lambda a: tf.tensor(a).to("fake"))
    assert str(device.device) == "fake:0" and device.dtype == host.dtype
    assert np.array_equal(device.cpu().data, host.data)
