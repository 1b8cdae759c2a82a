"""PyTorch's everyday API, run as tutorials write it: each piece of code runs once with `torch`
and once with `tinyformer` passed in as the library, and the outputs (and gradients, where
there are any) agree. Then the errors a PyTorch user meets, each naming what to do. Skipped
when torch is not installed (the error tests at the end run without it)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer

try:
    import torch
except ImportError:  # the oracle tests skip; the error tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is the oracle")
LIBRARIES = ["torch", "tinyformer"]


def _lib(name):
    return torch if name == "torch" else tinyformer


def _np(value):
    """A result as NumPy data, for comparing the two libraries' results."""
    if isinstance(value, (list, tuple)):
        return [_np(v) for v in value]
    if isinstance(value, dict):
        return {k: _np(v) for k, v in value.items()}
    if hasattr(value, "detach"):
        return np.asarray(value.detach())
    return value


def _same(ours, theirs, exact=True):
    """Equal values of the same dtype (the NumPy dtype of torch's), recursively."""
    if isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, exact)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), (ours, theirs)
        for k in theirs:
            _same(ours[k], theirs[k], exact)
    elif isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), ours
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (ours, theirs)
        if exact:
            np.testing.assert_array_equal(ours, theirs)
        else:
            np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)
    else:
        assert type(ours) is type(theirs) and ours == theirs, (ours, theirs)


def both(code, exact=True):
    """Run `code(lib)` with torch and with tinyformer; their results agree."""
    results = {name: _np(code(_lib(name))) for name in LIBRARIES}
    _same(results["tinyformer"], results["torch"], exact)
    return results["tinyformer"]


# -- creation and dtypes ---------------------------------------------------------------------


@needs_torch
@pytest.mark.parametrize(
    "args", [(0, 1, 5), (-3.3, 7.1, 13), (0.1, 0.9, 100), (5, -2, 33), (2.0, 5.0, 1), (0, 1, 0)]
)
def test_linspace_gives_pytorchs_values_to_the_bit(args):
    both(lambda lib: lib.linspace(*args))
    both(lambda lib: lib.linspace(*args, dtype=lib.float64))
    both(lambda lib: lib.linspace(args[0], args[1], steps=args[2], dtype=lib.long))


@needs_torch
def test_dtype_names_make_the_same_dtypes():
    names = ["uint8", "int8", "int16", "int32", "int64", "long", "int", "short", "float16",
             "half", "float32", "float", "float64", "double", "bool"]  # fmt: skip
    for name in names:
        both(lambda lib, name=name: lib.zeros(2, 3, dtype=getattr(lib, name)))
        both(lambda lib, name=name: lib.tensor([1, 0, 3], dtype=getattr(lib, name)))
        both(lambda lib, name=name: lib.ones(2).to(getattr(lib, name)))
    assert tinyformer.tensor([1]).dtype == tinyformer.long
    assert tinyformer.zeros(2, dtype=tinyformer.uint8).type() == "tinyformer.ByteTensor"


@needs_torch
def test_empty_has_the_shape_and_dtype():
    both(lambda lib: lib.empty(2, 3).shape == (2, 3))
    both(lambda lib: lib.empty((4,), dtype=lib.long).dtype == lib.int64)
    x = tinyformer.empty(3, requires_grad=True)
    assert x.requires_grad and x.shape == (3,)


@needs_torch
def test_legacy_constructors():
    both(lambda lib: lib.FloatTensor([1, 2, 3]))
    both(lambda lib: lib.LongTensor([1.7, 2, -3.2]))
    both(lambda lib: lib.DoubleTensor([[1, 2]]))
    both(lambda lib: lib.IntTensor([1, 2]))
    both(lambda lib: lib.BoolTensor([1, 0]))
    both(lambda lib: lib.FloatTensor(np.array([1, 2], np.int64)))
    both(lambda lib: lib.FloatTensor(2, 3).shape)
    both(lambda lib: lib.LongTensor(4).dtype == lib.long)
    both(lambda lib: lib.FloatTensor().shape)
    both(lambda lib: [isinstance(lib.zeros(2), lib.FloatTensor),
                      isinstance(lib.zeros(2), lib.LongTensor),
                      isinstance(lib.zeros(2, dtype=lib.long), lib.LongTensor)])  # fmt: skip
    x = tinyformer.zeros(2)
    assert tinyformer.FloatTensor(x) is x


def test_legacy_constructor_refuses_another_dtype():
    with pytest.raises(TypeError, match=r"FloatTensor: expected a tensor of dtype float32"):
        tinyformer.FloatTensor(tinyformer.zeros(2, dtype=tinyformer.float64))


def test_bfloat16_is_a_clear_error():
    with pytest.raises(AttributeError, match="tinyformer.bfloat16: NumPy.* has no bfloat16"):
        tinyformer.bfloat16  # noqa: B018


def test_randperm_is_a_permutation_from_the_seeded_generator():
    tinyformer.manual_seed(0)
    first = tinyformer.randperm(10)
    tinyformer.manual_seed(0)
    again = tinyformer.randperm(10)
    assert first.dtype == np.int64 and sorted(first.tolist()) == list(range(10))
    assert first.tolist() == again.tolist()
    g = tinyformer.Generator().manual_seed(3)
    tinyformer.manual_seed(0)
    own = tinyformer.randperm(10, generator=g).tolist()
    assert tinyformer.randperm(10).tolist() == first.tolist()  # the global one did not move
    assert tinyformer.randperm(10, generator=tinyformer.Generator().manual_seed(3)).tolist() == own
    assert tinyformer.randperm(0).shape == (0,)
    with pytest.raises(TypeError, match="expected a tinyformer.Generator"):
        tinyformer.randperm(3, generator=np.random.default_rng(0))


# -- 0-d tensors as Python numbers -------------------------------------------------------------


@needs_torch
def test_zero_d_tensors_are_used_as_numbers():
    def code(lib):
        words = ["a", "b", "c", "d", "e"]
        x = lib.arange(10)
        n = lib.tensor(3)
        i = x.argmax() - 7  # a 0-d int64 tensor, as argmax gives
        loss = lib.tensor(0.123456)
        return [
            words[i], words[:n], list(range(n)), x[:n], x[n:], x[lib.tensor([2])],
            f"{loss:.4f}", f"{loss.item():.2e}", f"step {n:4d}", f"{lib.tensor(True)}",
            format(lib.tensor(2.5)), int(lib.tensor(3.9)), float(lib.tensor([[2]])),
            bool(lib.tensor([0.0])), bool(lib.tensor(1)), int(lib.tensor(-2.5)),
            [10, 20, 30][lib.tensor([1])],
        ]  # fmt: skip

    both(code)


def test_index_refuses_floats_and_many_elements_naming_the_tensor():
    with pytest.raises(TypeError, match=r"Tensor.__index__: only integer 0-d tensors can be "
                       r"used as an index; got float32"):  # fmt: skip
        [1, 2, 3][tinyformer.tensor(1.0)]
    with pytest.raises(TypeError, match=r"Tensor.__index__: .*; got float32"):
        tinyformer.arange(5)[: tinyformer.tensor(2.0)]
    with pytest.raises(TypeError, match=r"Tensor.__index__: .*; got shape \(2,\)"):
        range(tinyformer.tensor([1, 2]))


def test_format_spec_and_truth_of_many_elements():
    x = tinyformer.tensor([1.0, 2.0])
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match=r"Tensor.__format__: the format spec '.2f' .* \(2,\)"):
        f"{x:.2f}"
    with pytest.raises(RuntimeError, match=r"Tensor.__bool__: .* shape \(2,\) is ambiguous"):
        bool(x)
    with pytest.raises(ValueError, match=r"Tensor.__float__: only one-element tensors"):
        float(x)


# -- boolean tensors -------------------------------------------------------------------------


@needs_torch
def test_masks_combine_with_logical_operators():
    def code(lib):
        lengths = lib.tensor([3, 5])
        T = 5
        causal = lib.tril(lib.ones(T, T)).bool()  # (T, T)
        padding = lib.arange(T)[None, :] < lengths[:, None]  # (B, T)
        mask = causal[None] & padding[:, None, :]  # (B, T, T)
        scores = lib.arange(2 * T * T, dtype=lib.float32).reshape(2, T, T)
        filled = scores.masked_fill(~mask, float("-inf"))
        either = (scores > 40) | (scores < 3)
        one = (scores > 10) ^ mask
        flags = lib.tensor([True, False])
        ints = lib.tensor([6, 3], dtype=lib.int32)
        return [mask, filled, either, one, True & flags, flags | False, 1 ^ flags,
                ints & 5, ints | lib.tensor([1, 8], dtype=lib.int32), ints ^ 2, ~ints,
                3 & lib.tensor([1, 2]), flags & lib.tensor([1, 1], dtype=lib.uint8),
                mask.logical_not(), lib.tensor([0.0, 2.0]).logical_not(), ~lengths]  # fmt: skip

    both(code)


def test_logical_operators_refuse_float_tensors():
    x = tinyformer.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"Tensor.__and__: & is logical on boolean .* float32"):
        x & (x > 1)
    with pytest.raises(RuntimeError, match=r"Tensor.__ror__: \| .* float"):
        0.5 | (x > 1)
    with pytest.raises(RuntimeError, match=r"Tensor.__invert__: ~ .* as in ~\(x > 0\)"):
        ~x  # noqa: B018
    m = x > 1
    assert not (m & m).requires_grad
