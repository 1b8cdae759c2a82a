"""PyTorch's math ops, dtype names and type promotion: what the generic op suite does not cover.

The ops' gradients are checked by the generic suite and against PyTorch by the oracle; here are
their PyTorch spellings (methods, dim=/keepdim=), the points where finite differences say nothing
(ties of amax, zeros of prod, the zero vector of norm), their errors, and dtypes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tinyformer as tf
import tinyformer.nn.functional as F
from tinyformer import OpError

X = np.random.default_rng(0).standard_normal((2, 3, 4))


def _leaf(a, dtype=np.float64):
    return tf.tensor(np.asarray(a, dtype=dtype), requires_grad=True)


# -- methods and PyTorch's argument names ------------------------------------------------------

# (name, method call with PyTorch's names, the functional call with NumPy's)
METHODS = [
    ("sin", lambda x: x.sin(), lambda x: tf.sin(x)),
    ("cos", lambda x: x.cos(), lambda x: tf.cos(x)),
    ("rsqrt", lambda x: (x * x + 1).rsqrt(), lambda x: tf.rsqrt(x * x + 1)),
    ("erf", lambda x: x.erf(), lambda x: tf.erf(x)),
    ("log1p", lambda x: (x * x).log1p(), lambda x: tf.log1p(x * x)),
    ("prod", lambda x: x.prod(dim=1, keepdim=True), lambda x: tf.prod(x, axis=1, keepdims=True)),
    ("amax", lambda x: x.amax(dim=(0, 2)), lambda x: tf.amax(x, axis=(0, 2))),
    ("amin", lambda x: x.amin(dim=-1, keepdim=True), lambda x: tf.amin(x, -1, True)),
    ("norm", lambda x: x.norm(p=1, dim=2, keepdim=True), lambda x: tf.norm(x, 1, 2, True)),
    ("norm fro", lambda x: x.norm("fro"), lambda x: tf.norm(x)),
    ("roll", lambda x: x.roll((1, -2), (0, 2)), lambda x: tf.roll(x, (1, -2), dims=(0, 2))),
    ("F.normalize", lambda x: F.normalize(x, dim=-1), lambda x: tf.ops.normalize(x, axis=-1)),
    ("tf.prod dim", lambda x: tf.prod(x, dim=0), lambda x: tf.prod(x, axis=0)),
    ("tf.norm dim", lambda x: tf.norm(x, dim=1, keepdim=True), lambda x: tf.norm(x, 2, 1, True)),
]  # fmt: skip


@pytest.mark.parametrize("name, method, functional", METHODS, ids=[m[0] for m in METHODS])
def test_methods_and_torch_names_match_the_functional_ops(name, method, functional):
    a, b = _leaf(X), _leaf(X)
    ya, yb = method(a), functional(b)
    assert ya.shape == yb.shape and np.array_equal(ya.data, yb.data), name
    (ya * ya).sum().backward()
    (yb * yb).sum().backward()
    assert np.array_equal(a.grad, b.grad), name


def test_outer_method_and_values():
    a, b = tf.tensor([1.0, 2.0]), tf.tensor([3.0, 4.0, 5.0])
    assert np.array_equal(a.outer(b).data, np.outer([1, 2], [3, 4, 5]))


# -- the points where finite differences say nothing -------------------------------------------


def test_prod_gradient_at_zeros_is_the_product_of_the_others():
    x = _leaf([2.0, 0.0, 3.0, 4.0])
    tf.prod(x).backward()
    assert np.array_equal(x.grad, [0.0, 24.0, 0.0, 0.0])  # dividing y by x gives nan here
    x = _leaf([[2.0, 0.0, 0.0], [1.0, 5.0, 3.0]])
    tf.prod(x, axis=1).sum().backward()
    assert np.array_equal(x.grad, [[0.0, 0.0, 0.0], [15.0, 3.0, 5.0]])


def test_amax_and_amin_split_the_gradient_evenly_among_ties():
    x = _leaf([[1.0, 3.0, 3.0, 3.0], [2.0, 2.0, -1.0, 0.0]])
    tf.amax(x, dim=1).sum().backward()
    assert np.allclose(x.grad, [[0, 1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0, 0]])
    x = _leaf([[1.0, 1.0, 3.0], [1.0, 1.0, 1.0]])
    tf.amin(x).backward()  # over everything: five elements tie for the minimum
    assert np.allclose(x.grad, [[0.2, 0.2, 0], [0.2, 0.2, 0.2]])


@pytest.mark.parametrize("p", [2, 1, math.inf, 3.0])
def test_norm_of_a_zero_vector_has_zero_gradient(p):
    x = _leaf([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])
    y = tf.norm(x, p, axis=1)
    y.sum().backward()
    assert np.array_equal(x.grad[0], [0.0, 0.0, 0.0])
    assert np.all(np.isfinite(x.grad))


def test_normalize_leaves_zero_rows_zero_and_makes_unit_rows():
    x = _leaf([[0.0, 0.0], [3.0, 4.0]])
    y = F.normalize(x, dim=1)
    assert np.allclose(y.data, [[0.0, 0.0], [0.6, 0.8]])
    y.sum().backward()
    assert np.all(np.isfinite(x.grad))


def test_erf_matches_math_erf_to_float64_precision():
    z = np.concatenate([np.linspace(-7, 7, 5001), np.logspace(-12, 0, 200), [0.0, 0.49, 0.51]])
    exact = np.array([math.erf(v) for v in z])
    got = tf.erf(tf.tensor(z)).data
    assert np.max(np.abs(got - exact)) < 2e-15
    tiny = np.abs(exact) > 0  # relative precision near 0, where 1 - erfc(x) would cancel
    assert np.max(np.abs(got[tiny] - exact[tiny]) / np.abs(exact[tiny])) < 1e-14


def test_meshgrid_gives_numpy_grids_for_both_indexings_and_takes_a_list():
    a, b, c = tf.tensor([1.0, 2.0]), tf.tensor([3.0, 4.0, 5.0]), tf.tensor(7.0)
    for indexing in ("ij", "xy"):
        grids = tf.meshgrid(a, b, c, indexing=indexing)
        expected = np.meshgrid([1.0, 2.0], [3.0, 4.0, 5.0], [7.0], indexing=indexing)
        assert all(np.array_equal(g.data, e) for g, e in zip(grids, expected))
    assert tf.meshgrid([a, b])[0].shape == (2, 3)  # PyTorch's default: "ij"


def test_meshgrid_gradient_sums_each_grid_onto_its_vector():
    a, b = _leaf([1.0, 2.0]), _leaf([3.0, 4.0, 5.0])
    ga, gb = tf.meshgrid(a, b, indexing="xy")  # both (3, 2)
    (ga * 2 + gb).sum().backward()
    assert np.array_equal(a.grad, [6.0, 6.0]) and np.array_equal(b.grad, [2.0, 2.0, 2.0])


def test_roll_without_dims_rolls_the_flattened_tensor():
    x = tf.tensor(np.arange(6.0).reshape(2, 3))
    assert np.array_equal(x.roll(1).data, [[5.0, 0.0, 1.0], [2.0, 3.0, 4.0]])
    assert np.array_equal(tf.roll(x, -1, 1).data, [[1.0, 2.0, 0.0], [4.0, 5.0, 3.0]])


# -- errors ------------------------------------------------------------------------------------

ERRORS = [
    ("outer of a matrix", lambda: tf.outer(tf.ones(2, 3), tf.ones(3)), r"outer.*\(2, 3\)"),
    ("roll lengths", lambda: tf.roll(tf.ones(2, 3), (1, 2), 0), r"roll.*\(1, 2\).*\(0,\)"),
    ("roll no dims", lambda: tf.roll(tf.ones(2, 3), (1, 2)), r"roll.*single int"),
    ("roll dim range", lambda: tf.roll(tf.ones(2, 3), 1, 2), r"roll: dim 2.*\(2, 3\)"),
    ("norm p=0", lambda: tf.norm(tf.ones(3), 0), r"norm: p = 0"),
    ("norm p<0", lambda: tf.norm(tf.ones(3), -1), r"norm: p = -1"),
    ("norm nuc", lambda: tf.norm(tf.ones(3), "nuc"), r"norm: p must be.*'nuc'"),
    ("norm int", lambda: tf.norm(tf.ones(3, dtype=tf.int64)), r"norm.*int64"),
    ("prod axis", lambda: tf.prod(tf.ones(2, 3), 2), r"prod: axis 2"),
    ("amax axis", lambda: tf.amax(tf.ones(2, 3), dim=(0, 0)), r"amax: repeated axis"),
    ("amin axis", lambda: tf.amin(tf.ones(2, 3), 5), r"amin: axis 5"),
    ("max float dim", lambda: tf.ones(2, 3).max(1.5), r"max: axis must be an int .*got 1\.5"),
    ("sum str axis", lambda: tf.ones(2, 3).sum(axis="a"), r"sum: axis must be an int .*got 'a'"),
    ("mean bool axis", lambda: tf.ones(2, 3).mean(True), r"mean: axis must be an int .*got True"),
    ("meshgrid 2-d", lambda: tf.meshgrid(tf.ones(2), tf.ones(2, 2)), r"meshgrid.*\(2, 2\)"),
    ("meshgrid indexing", lambda: tf.meshgrid(tf.ones(2), indexing="ji"), r"meshgrid.*'ji'"),
    ("meshgrid dtypes", lambda: tf.meshgrid(tf.ones(2), tf.ones(2, dtype=tf.float64)), "dtype"),
]  # fmt: skip


@pytest.mark.parametrize("name, call, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments_raise_errors_naming_the_op(name, call, message):
    with pytest.raises(OpError, match=message):
        call()


# -- dtype names and conversions ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, dtype",
    [("bool", np.bool_), ("float16", np.float16), ("int32", np.int32), ("half", np.float16),
     ("double", np.float64), ("int", np.int32), ("float", np.float32), ("long", np.int64)],
)  # fmt: skip
def test_dtype_names_work_in_creation_functions_and_to(name, dtype):
    tf_dtype = getattr(tf, name)
    made = [
        tf.zeros(2, dtype=tf_dtype),
        tf.ones(2, 3, dtype=tf_dtype),
        tf.full((2,), 1, dtype=tf_dtype),
        tf.tensor([1, 0], tf_dtype),
        tf.arange(3, dtype=tf_dtype),
        tf.randn(2, dtype=tf_dtype),
    ]
    assert all(t.dtype == dtype for t in made)
    assert tf.tensor([1.5, 0.0]).to(tf_dtype).dtype == dtype
    assert tf.tensor([1.5, 0.0]).type(tf_dtype).dtype == dtype


def test_bool_int_half_conversions():
    x = tf.tensor([1.5, 0.0, -2.0])
    assert x.bool().data.tolist() == [True, False, True]
    assert x.int().dtype == np.int32 and x.int().data.tolist() == [1, 0, -2]
    assert x.half().dtype == np.float16
    h = tf.tensor([1.0, 2.0], requires_grad=True)
    h.half().sum().backward()  # differentiable between floating dtypes
    assert h.grad.dtype == np.float32 and np.array_equal(h.grad, [1.0, 1.0])


def test_type_names_the_type_and_converts_by_name():
    x = tf.tensor([1.0, 2.0])
    assert x.type() == "tinyformer.FloatTensor"
    assert x.long().type() == "tinyformer.LongTensor"
    assert x.bool().type() == "tinyformer.BoolTensor"
    assert x.to("fake").type() == "tinyformer.fake.FloatTensor"
    assert x.type("torch.DoubleTensor").dtype == np.float64  # PyTorch's names work too
    assert x.type(x.int().type()).dtype == np.int32
    assert x.type(tf.float32) is x  # nothing to change, as x.to()
    with pytest.raises(ValueError, match="tinyformer.FloatTensor"):
        x.type("torch.ComplexTensor")


# -- type promotion, as PyTorch's --------------------------------------------------------------

I64 = np.array([1, 2, 3], np.int64)
I32 = np.array([1, 2, 3], np.int32)
F32 = np.array([1.0, 2.0, 3.0], np.float32)
F64 = np.array([1.0, 2.0, 3.0], np.float64)
B = np.array([True, False, True])

# (name, a, b as an array or a Python scalar, op, the dtype PyTorch gives)
PROMOTIONS = [
    ("int64 / int", I64, 2, "div", np.float32),
    ("int / int64", 2, I64, "div", np.float32),
    ("int64 / int64", I64, I64, "div", np.float32),
    ("int32 / int", I32, 2, "div", np.float32),
    ("bool / int", B, 2, "div", np.float32),
    ("int64 * float", I64, 1.5, "mul", np.float32),
    ("int64 + float", I64, 0.5, "add", np.float32),
    ("int64 * float32", I64, F32, "mul", np.float32),
    ("float32 - int64", F32, I64, "sub", np.float32),
    ("float64 * int32", F64, I32, "mul", np.float64),
    ("float32 * float", F32, 2.5, "mul", np.float32),
    ("float32 / int", F32, 3, "div", np.float32),
    ("float32 * float64", F32, F64, "mul", np.float64),
    ("int32 + int", I32, 1, "add", np.int32),
    ("int64 * int", I64, 3, "mul", np.int64),
    ("int32 + int64", I32, I64, "add", np.int64),
    ("bool + int", B, 1, "add", np.int64),
    ("bool * float", B, 1.5, "mul", np.float32),
    ("int64 ** float", I64, 0.5, "pow", np.float32),
    ("maximum(int64, float)", I64, 1.5, "maximum", np.float32),
]

_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a**b,
}


def _tf_operand(v):
    return tf.tensor(v, dtype=v.dtype) if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("name, a, b, op, dtype", PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_promotion_gives_pytorchs_dtype_and_values(name, a, b, op, dtype):
    fn = tf.maximum if op == "maximum" else _OPS[op]
    y = fn(_tf_operand(a), _tf_operand(b))
    assert y.dtype == dtype, name
    expected = (np.maximum if op == "maximum" else _OPS[op])(np.asarray(a), np.asarray(b))
    np.testing.assert_allclose(y.data, expected.astype(dtype), rtol=1e-6)


@pytest.mark.parametrize("name, a, b, op, dtype", PROMOTIONS, ids=[p[0] for p in PROMOTIONS])
def test_promotion_table_is_pytorchs(name, a, b, op, dtype):
    torch = pytest.importorskip("torch")

    def operand(v):
        return torch.from_numpy(v) if isinstance(v, np.ndarray) else v

    fn = torch.maximum if op == "maximum" else _OPS[op]
    a_t, b_t = operand(a), operand(b)
    if op == "maximum":  # torch.maximum takes tensors only
        b_t = torch.tensor(b_t) if not isinstance(b_t, torch.Tensor) else b_t
        b_t = b_t.to(torch.float32)  # a Python float scalar tensor is float32 in torch too
    assert fn(a_t, b_t).numpy().dtype == dtype, name


def test_a_float32_leaf_times_an_integer_tensor_gets_a_float32_gradient():
    # NumPy makes float32 * int64 float64, whose gradient the engine refused for a float32 leaf.
    w = tf.tensor([1.0, 2.0, 3.0], requires_grad=True)
    counts = tf.tensor([1, 2, 3])
    y = w * counts / 2
    assert y.dtype == np.float32
    y.sum().backward()
    assert w.grad.dtype == np.float32 and np.array_equal(w.grad, [0.5, 1.0, 1.5])


def test_integer_division_on_a_device_stays_there():
    y = tf.tensor([1, 2, 3]).to("fake") / 2
    assert y.dtype == np.float32 and y.device == tf.device("fake")
    assert y.cpu().data.tolist() == [0.5, 1.0, 1.5]


def test_any_and_all_stay_on_the_tensors_device():
    x = tf.tensor([[0.0, 1.0], [2.0, 3.0]]).to("fake")
    assert x.any().device == x.device and x.any().item() is True
    assert x.all(dim=1).cpu().tolist() == [False, True]
