"""The registry's thread rule (registry.py, "Threads"): a kernel call whose work is below its
primitive's measured threshold runs on one thread, larger calls on the pool; forced blocks use
the pool, `prefer("numpy")` still forces the reference, and the choice is made once per
(primitive, dtype, array type, preference)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

import tinyformer.nn.functional as F
from tinyformer import registry, thread_table
from tinyformer.tensor import Tensor

NAME = "softmax.forward"


@pytest.fixture
def counting_kernel(monkeypatch):
    """softmax.forward's numba kernel replaced by one that records Numba's thread count inside
    each call, with a threshold of 100 elements."""
    registry.primitives()  # load the real table first, so that the patch is undone onto it
    monkeypatch.setitem(registry._table, NAME, dict(registry._table[NAME]))
    monkeypatch.setitem(registry._state["one_thread_below"], NAME, 100)
    threads: list[int] = []

    def softmax_forward(x):
        threads.append(numba.get_num_threads())
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    registry.kernel(NAME, backend="numba", dtypes=("float32",))(softmax_forward)
    yield threads
    monkeypatch.undo()
    registry._cache.clear()


def test_calls_below_the_threshold_run_on_one_thread(counting_kernel):
    pool = numba.get_num_threads()
    F.softmax(Tensor(np.ones((3, 33), np.float32)))  # 99 elements: one thread
    F.softmax(Tensor(np.ones((4, 25), np.float32)))  # 100: the pool
    assert counting_kernel == [1, pool]
    assert numba.get_num_threads() == pool  # put back after the call


def test_the_thread_count_is_put_back_when_the_kernel_raises(counting_kernel):
    pool = numba.get_num_threads()
    with pytest.raises(ValueError):
        registry.call(NAME, np.ones((1, 0), np.float32))  # max of an empty row raises
    assert counting_kernel == [1] and numba.get_num_threads() == pool


def test_forced_blocks_use_the_pool_and_prefer_numpy_the_reference(counting_kernel):
    pool = numba.get_num_threads()
    with registry.prefer("numba", force=True):
        registry.call(NAME, np.ones((2, 3), np.float32))
    with registry.prefer("numpy"):
        y = registry.call(NAME, np.ones((2, 3), np.float32))
    assert counting_kernel == [pool]  # the reference ran in the numpy block
    np.testing.assert_allclose(y, np.full((2, 3), 1 / 3, np.float32))


def test_one_thread_says_the_branch(counting_kernel):
    small, large = np.ones((2, 3), np.float32), np.ones((10, 10), np.float32)
    assert registry.one_thread(NAME, small) and not registry.one_thread(NAME, large)
    assert not registry.one_thread(NAME, small.astype(np.float64))  # the reference runs
    with registry.prefer("numba", force=True):
        assert not registry.one_thread(NAME, small)


def test_explain_names_the_branch_and_its_threshold(counting_kernel):
    assert "under 100 elements" in registry.explain(NAME)
    assert "a call of 99 elements runs on one thread" in registry.explain(NAME, size=99)
    assert "a call of 100 elements runs on the thread pool" in registry.explain(NAME, size=100)
    with registry.prefer("numba", force=True):
        assert "thread pool at every size" in registry.explain(NAME, size=99)


def test_the_choice_is_made_once_per_primitive_dtype_and_preference(counting_kernel, monkeypatch):
    asked = []
    preference = registry._preference
    monkeypatch.setattr(registry, "_preference", lambda a: asked.append(a.dtype) or preference(a))
    registry._cache.clear()
    for shape in ((2, 3), (5, 40), (2, 3)):
        registry.call(NAME, np.ones(shape, np.float32))
    registry.call(NAME, np.ones((2, 3), np.float64))
    assert asked == [np.float32, np.float64]


def test_work_is_the_first_array_or_the_largest_of_a_list():
    assert registry.work(np.ones((3, 4))) == 12
    assert registry.work([np.ones(5), np.ones((2, 4)), np.ones(3)]) == 8
    assert registry.work([]) == 0


def test_the_measured_table_names_parallel_kernels_only():
    registry.primitives()
    for name, below in thread_table.ONE_THREAD_BELOW.items():
        assert "numba" in registry.backends(name), name
        assert isinstance(below, int) and below > 0, name
    assert registry._state["one_thread_below"] == thread_table.ONE_THREAD_BELOW
