"""Optional oracle for tests/test_torch_tensor_extras.py: the same names against PyTorch
(torch==2.13.0, CPU): values, dtypes and gradients. Skipped when torch is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

RNG = np.random.default_rng(1)


def _pair(array, grad):
    """The same data as a tinyformer and a torch tensor."""
    grad = grad and array.dtype.kind == "f"
    return tf.tensor(array, requires_grad=grad), torch.tensor(array, requires_grad=grad)


def _same(ours, theirs, exact=False):
    """Same values (to the bit when `exact`, else to the dtype's rounding) and dtype."""
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, exact)
        return
    expected = theirs.detach().numpy()
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch."), (ours.dtype, theirs.dtype)
    assert ours.shape == tuple(theirs.shape)
    if exact or expected.dtype.kind not in "f":
        np.testing.assert_array_equal(ours.data, expected)
    else:
        tol = {2: 1e-3, 4: 2e-6, 8: 1e-14}[expected.dtype.itemsize]
        np.testing.assert_allclose(ours.data, expected, rtol=tol, atol=tol)


def check(ours, theirs, *arrays, grad=True, exact=False):
    """`ours(*tensors)` against `theirs(*tensors)`: values, dtypes and, for float inputs that
    `grad` asks for, the gradients of a random weighting of the output."""
    pairs = [_pair(a, grad) for a in arrays]
    out, ref = ours(*(p[0] for p in pairs)), theirs(*(p[1] for p in pairs))
    _same(out, ref, exact)
    if not grad:
        return
    assert out.requires_grad == ref.requires_grad
    if not ref.requires_grad:  # counts, indices, tests: data in both
        return
    weights = RNG.standard_normal(tuple(ref.shape))
    (out * tf.tensor(weights, dtype=out.dtype)).sum().backward()
    (ref * torch.tensor(weights, dtype=ref.dtype)).sum().backward()
    for (t_ours, t_ref), a in zip(pairs, arrays):
        if a.dtype.kind == "f":
            np.testing.assert_allclose(t_ours.grad, t_ref.grad.numpy(), rtol=1e-12, atol=1e-12)


def _f64(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape)


POSITIVE = _f64(3, 4, low=0.1, high=9.0)
CASES = {
    "square": (lambda x: x.square(), torch.square, [_f64(3, 4)]),
    "square int": (tf.square, torch.square, [np.array([[1, -2], [3, 4]], np.int32)]),
    "square bool": (tf.square, torch.square, [np.array([True, False])]),
    "reciprocal": (tf.reciprocal, torch.reciprocal, [POSITIVE]),
    "reciprocal int": (lambda x: x.reciprocal(), torch.reciprocal, [np.array([1, 2, 4])]),
    "log2": (tf.log2, torch.log2, [POSITIVE]),
    "log10": (lambda x: x.log10(), torch.log10, [POSITIVE]),
    "log2 int": (lambda x: x.log2(), torch.log2, [np.array([1, 2, 5], np.int64)]),
    "lerp scalar small": (lambda a, b: a.lerp(b, 0.3), lambda a, b: a.lerp(b, 0.3),
                          [_f64(2, 3), _f64(2, 3)]),
    "lerp scalar large": (lambda a, b: tf.lerp(a, b, 0.8), lambda a, b: torch.lerp(a, b, 0.8),
                          [_f64(2, 3), _f64(3)]),
    "lerp tensor": (tf.lerp, torch.lerp,
                    [_f64(2, 3), _f64(2, 3), np.array([0.1, 0.5, 0.9])]),
    "dot": (tf.dot, torch.dot, [_f64(5), _f64(5)]),
    "mv": (lambda m, v: m.mv(v), torch.mv, [_f64(3, 5), _f64(5)]),
    "mm": (tf.mm, torch.mm, [_f64(3, 5), _f64(5, 2)]),
    "masked_select": (lambda x: tf.masked_select(x, tf.tensor([[True], [False]])),
                      lambda x: torch.masked_select(x, torch.tensor([[True], [False]])),
                      [_f64(2, 3)]),
    "movedim": (lambda x: x.movedim((0, 1), (2, 0)), lambda x: x.movedim((0, 1), (2, 0)),
                [_f64(2, 3, 4)]),
    "moveaxis": (lambda x: tf.moveaxis(x, -1, 0), lambda x: torch.moveaxis(x, -1, 0),
                 [_f64(2, 3, 4)]),
    "swapaxes": (lambda x: tf.swapaxes(x, 0, 2), lambda x: torch.swapaxes(x, 0, 2),
                 [_f64(2, 3, 4)]),
    "swapdims": (lambda x: x.swapdims(-1, 1), lambda x: x.swapdims(-1, 1), [_f64(2, 3, 4)]),
    "unflatten": (lambda x: x.unflatten(1, (2, -1)), lambda x: x.unflatten(1, (2, -1)),
                  [_f64(3, 4)]),
    "tile short": (lambda x: tf.tile(x, (2,)), lambda x: torch.tile(x, (2,)), [_f64(2, 3)]),
    "tile long": (lambda x: x.tile((2, 1, 3)), lambda x: x.tile((2, 1, 3)), [_f64(2, 3)]),
    "fliplr": (tf.fliplr, torch.fliplr, [_f64(2, 3, 2)]),
    "flipud": (lambda x: x.flipud(), lambda x: x.flipud(), [_f64(3, 2)]),
    "broadcast_to": (lambda x: tf.broadcast_to(x, (4, -1, 3)),
                     lambda x: torch.broadcast_to(x, (4, -1, 3)), [_f64(2, 1)]),
    "hstack": (lambda a, b: tf.hstack([a, b]), lambda a, b: torch.hstack([a, b]),
               [_f64(2, 3), _f64(2, 2)]),
    "hstack 1-d": (lambda a, b: tf.hstack((a, b)), lambda a, b: torch.hstack((a, b)),
                   [_f64(3), np.array(1.5)]),
    "vstack": (lambda a, b: tf.vstack([a, b]), lambda a, b: torch.vstack([a, b]),
               [_f64(2, 3), _f64(3)]),
    "diff": (tf.diff, torch.diff, [_f64(3, 5)]),
    "diff n dim prepend append": (
        lambda x, p, q: tf.diff(x, n=2, dim=0, prepend=p, append=q),
        lambda x, p, q: torch.diff(x, n=2, dim=0, prepend=p, append=q),
        [_f64(3, 4), _f64(1, 4), _f64(2, 4)]),
    "diff bool": (tf.diff, torch.diff, [np.array([True, False, False, True])]),
    "cumprod": (lambda x: tf.cumprod(x, 1),  lambda x: torch.cumprod(x, 1),
                [np.array([[0.0, 2.0, -3.0, 1.5], [1.0, 0.0, 4.0, 0.0], [-1, 0, 0.5, 3]])]),
    "cumprod dim 0": (lambda x: tf.cumprod(x, 0), lambda x: torch.cumprod(x, 0), [_f64(4, 3)]),
    "cumprod int": (lambda x: tf.cumprod(x, 0), lambda x: torch.cumprod(x, 0),
                    [np.array([1, 2, 3], np.int32)]),
    "nan_to_num": (tf.nan_to_num, torch.nan_to_num,
                   [np.array([np.nan, np.inf, -np.inf, 0.5, -2.0])], False),
    "nan_to_num given": (lambda x: x.nan_to_num(1.0, 2.0, -3.0),
                         lambda x: x.nan_to_num(1.0, 2.0, -3.0),
                         [np.array([np.nan, np.inf, -np.inf, 0.5])]),
    "nan_to_num float16": (tf.nan_to_num, torch.nan_to_num,
                           [np.array([np.nan, np.inf, -np.inf], np.float16)], False),
    "count_nonzero": (tf.count_nonzero, torch.count_nonzero,
                      [np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])]),
    "count_nonzero dims": (lambda x: x.count_nonzero(dim=(0, 1)),
                           lambda x: x.count_nonzero(dim=(0, 1)), [np.array([[0, 1], [2, 0]])]),
    "count_nonzero dim": (lambda x: tf.count_nonzero(x, 1), lambda x: torch.count_nonzero(x, 1),
                          [np.array([[0, 1], [2, 0]])]),
    "unique": (lambda x: tf.unique(x, return_inverse=True, return_counts=True),
               lambda x: torch.unique(x, return_inverse=True, return_counts=True),
               [np.array([[3, 1, 2], [1, 3, 3]])], False),
    # no gradient here; PyTorch's requires grad, and its backward is not implemented
    "unique floats": (lambda x: x.unique(), lambda x: x.unique(), [np.array([2.5, -1.0, 2.5])],
                      False),
    "bincount": (tf.bincount, torch.bincount, [np.array([0, 1, 1, 4])]),
    "bincount weights": (lambda i, w: tf.bincount(i, w, minlength=7),
                         lambda i, w: torch.bincount(i, w, minlength=7),
                         [np.array([0, 1, 1, 4]), np.array([0.5, 1.0, 2.0, 3.0], np.float32)],
                         False),  # PyTorch's requires grad, but its backward is not implemented
    "bincount int weights": (tf.bincount, torch.bincount,
                             [np.array([0, 1, 1]), np.array([1, 2, 3])]),
    "searchsorted": (tf.searchsorted, torch.searchsorted,
                     [np.array([1.0, 3.0, 5.0, 7.0]), np.array([[3.0, 6.0], [9.0, 0.0]])]),
    "searchsorted rows": (lambda s, v: tf.searchsorted(s, v, right=True, out_int32=True),
                          lambda s, v: torch.searchsorted(s, v, right=True, out_int32=True),
                          [np.array([[1, 3, 5, 7], [2, 4, 6, 8]]), np.array([[3, 6], [9, 0]])]),
    "searchsorted sorter": (
        lambda s, v, o: tf.searchsorted(s, v, side="right", sorter=o),
        lambda s, v, o: torch.searchsorted(s, v, side="right", sorter=o),
        [np.array([5.0, 1.0, 3.0]), np.array([1.0, 4.0, 5.0]), np.array([1, 2, 0])]),
    "bucketize": (tf.bucketize, torch.bucketize,
                  [np.array([[3, 6], [9, 0]]), np.array([1, 3, 5, 7])]),
    "bucketize right": (lambda x, b: tf.bucketize(x, b, right=True),
                        lambda x, b: torch.bucketize(x, b, right=True),
                        [np.array([3.0, 6.0, 1.0]), np.array([1.0, 3.0, 5.0])]),
    "logical_and": (tf.logical_and, torch.logical_and,
                    [np.array([1.0, 0.0, 2.0, 0.0]), np.array([3, 3, 0, 0])]),
    "logical_or": (lambda a, b: a.logical_or(b), lambda a, b: a.logical_or(b),
                   [np.array([1.0, 0.0, 2.0, 0.0]), np.array([3, 3, 0, 0])]),
    "logical_xor": (tf.logical_xor, torch.logical_xor,
                    [np.array([True, False, True]), np.array([True, True, False])]),
    "logical_not": (tf.logical_not, torch.logical_not, [np.array([1.5, 0.0])]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_against_pytorch(case):
    ours, theirs, arrays, *grad = CASES[case]
    check(ours, theirs, *arrays, grad=grad[0] if grad else True)


@pytest.mark.parametrize("name", ["square", "reciprocal", "log2", "log10"])
def test_float32_values_match_pytorchs(name):
    # positive float32 values of every magnitude, and the whole numbers' exact logarithms
    a = np.concatenate([RNG.uniform(0.01, 100, 2000), 2.0 ** np.arange(-30, 30),
                        10.0 ** np.arange(-6, 7)]).astype(np.float32)  # fmt: skip
    ours = getattr(tf, name)(tf.tensor(a)).data
    theirs = getattr(torch, name)(torch.tensor(a)).numpy()
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_max_ulp(ours, theirs, maxulp=1)
    if name.startswith("log"):  # equal to the bit but for the odd last-bit rounding
        assert (ours != theirs).mean() < 0.01


@pytest.mark.parametrize(
    ("start", "end", "steps", "base", "dtype"),
    [(0, 2, 5, 10.0, "float32"), (-3.3, 4.1, 17, 2.0, "float64"), (0.7, -3.4, 9, 3.7, "float32"),
     (1.5, 2.5, 1, 10.0, "float64"), (0, 1, 0, 10.0, "float32"), (-5, 5, 60, np.e, "float64")],
)  # fmt: skip
def test_logspace_is_pytorchs_to_the_bit(start, end, steps, base, dtype):
    ours = tf.logspace(start, end, steps, base, dtype=dtype)
    theirs = torch.logspace(start, end, steps, base, dtype=getattr(torch, dtype))
    _same(ours, theirs, exact=True)


@pytest.mark.parametrize(
    "view",
    [lambda x: x, lambda x: x.t(), lambda x: x[:, 1:], lambda x: x[0].expand(3, 4),
     lambda x: x.transpose(0, 1)[1:], lambda x: x.reshape(2, 2, 3)],
)  # fmt: skip
def test_stride_and_contiguity_match_pytorchs(view):
    a = np.arange(12.0).reshape(3, 4)
    ours, theirs = view(tf.tensor(a)), view(torch.tensor(a))
    assert ours.stride() == theirs.stride()
    assert ours.stride(-1) == theirs.stride(-1)
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert ours.element_size() == theirs.element_size()
    assert ours.is_cuda == theirs.is_cuda


def test_new_tensors_and_random_creation_have_pytorchs_dtypes_and_shapes():
    pairs = [_pair(np.zeros((2, 3), dt), False)[:2] for dt in (np.float32, np.int32, np.float64)]
    for ours, theirs in pairs:
        _same(ours.new_full((2, 2), 3), theirs.new_full((2, 2), 3))
        _same(ours.new_empty(4, 1), theirs.new_empty(4, 1).zero_())
        _same(tf.empty_like(ours), torch.empty_like(theirs).zero_())
        assert str(tf.randint_like(ours, 5).dtype) == str(torch.randint_like(theirs, 5).dtype)[6:]
    for mean, std in ((0.0, np.ones(3)), (np.zeros((2, 1)), 1.0), (np.zeros(3), np.ones((2, 3)))):
        args = [(tf.tensor(v), torch.tensor(v)) if isinstance(v, np.ndarray) else (v, v)
                for v in (mean, std)]  # fmt: skip
        ours, theirs = tf.normal(*(a[0] for a in args)), torch.normal(*(a[1] for a in args))
        assert ours.shape == tuple(theirs.shape) and str(ours.dtype) == str(theirs.dtype)[6:]
    assert tf.normal(1.0, 2.0, size=(3,)).dtype == np.float32


def test_default_dtype_as_in_pytorch():
    before, theirs_before = tf.get_default_dtype(), torch.get_default_dtype()
    try:
        for name in ("float64", "float16", "float32"):
            tf.set_default_dtype(getattr(tf, name))
            torch.set_default_dtype(getattr(torch, name))
            assert str(tf.get_default_dtype()) == str(torch.get_default_dtype())[6:]
            for make in (
                lambda m: m.tensor([1.0, 2.0]), lambda m: m.zeros(2), lambda m: m.randn(2),
                lambda m: m.arange(0.0, 2.0), lambda m: m.linspace(0, 1, 3),
                lambda m: m.logspace(0, 1, 3), lambda m: m.tensor([1, 2]) / 2,
                lambda m: m.tensor([1, 2]) * 0.5, lambda m: m.tensor([3, 4]).reciprocal(),
            ):  # fmt: skip
                assert str(make(tf).dtype) == str(make(torch).dtype)[6:], name
    finally:
        tf.set_default_dtype(before)
        torch.set_default_dtype(theirs_before)
