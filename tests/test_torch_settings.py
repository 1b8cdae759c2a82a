"""PyTorch's process settings (torch_settings.py): the default float dtype, the kernels'
threads, deterministic algorithms. Each test puts back what it changes: the settings are
process-wide, and a pytest worker runs other tests after these."""

from __future__ import annotations

import numpy as np
import pytest

import tinyformer as tf


@pytest.fixture
def default_dtype():
    """Put back the default float dtype whatever a test does (the setting is process-wide)."""
    before = tf.get_default_dtype()
    try:
        yield
    finally:
        tf.set_default_dtype(before)


def test_default_dtype_changes_what_floats_become(default_dtype):
    assert tf.get_default_dtype() == tf.float32
    tf.set_default_dtype(tf.float64)
    assert tf.get_default_dtype() == tf.float64
    made = [
        tf.tensor([1.0]), tf.randn(2), tf.rand(2), tf.zeros(2), tf.ones(2), tf.full((2,), 1.0),
        tf.empty(2), tf.eye(2), tf.arange(0.0, 1.0), tf.linspace(0, 1, 3), tf.logspace(0, 1, 3),
        tf.tensor([1, 2]) / 2, tf.tensor([1, 2]) * 1.5, tf.normal(0.0, 1.0, size=(2,)),
        tf.tensor([1, 2]).log2(),
    ]  # fmt: skip
    assert [str(t.dtype) for t in made] == ["float64"] * len(made)
    assert repr(tf.tensor([1.0])) == "tensor([1.])"  # the default dtype is not printed
    assert tf.finfo().dtype == np.float64
    assert tf.zeros(2, dtype=tf.float32).dtype == np.float32
    tf.set_default_dtype("float16")
    assert tf.tensor([0.5]).dtype == np.float16


def test_set_default_dtype_refuses_other_dtypes(default_dtype):
    for bad in (tf.int64, "bool", "not a dtype"):
        with pytest.raises(TypeError, match="set_default_dtype: only floating-point types"):
            tf.set_default_dtype(bad)
    assert tf.get_default_dtype() == tf.float32


def test_num_threads_caps_the_kernels():
    before = tf.get_num_threads()
    try:
        tf.set_num_threads(1)
        assert tf.get_num_threads() == 1
        tf.set_num_threads(10_000)  # beyond the pool: the whole pool
        assert tf.get_num_threads() >= 1
    finally:
        tf.set_num_threads(before)
    assert tf.get_num_threads() == before
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="set_num_threads: expects a positive integer"):
            tf.set_num_threads(bad)


def test_deterministic_algorithms_are_recorded():
    assert not tf.are_deterministic_algorithms_enabled()
    try:
        tf.use_deterministic_algorithms(True, warn_only=True)
        assert tf.are_deterministic_algorithms_enabled()
        assert tf.is_deterministic_algorithms_warn_only_enabled()
    finally:
        tf.use_deterministic_algorithms(False)
    assert not tf.are_deterministic_algorithms_enabled()
    with pytest.raises(TypeError, match="use_deterministic_algorithms: mode must be a bool"):
        tf.use_deterministic_algorithms(1)
