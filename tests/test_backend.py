"""Devices, array modules and the fake device: parsing and printing devices, moving arrays, the
errors a missing GPU and a host/device mix give, and the fake device refusing every implicit host
conversion that CuPy refuses (and the few more that the fake refuses on purpose). Tests that need
a real GPU skip without one; where they run, they check the fake's claims against CuPy."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from tinyformer import backend
from tinyformer.backend import (
    CUDA_INSTALL_HINT,
    Device,
    DeviceUnavailable,
    array_module,
    check_same_device,
    cuda_available,
    device,
    device_of,
    get_array_module,
    is_device_array,
    to_device,
    to_host,
)
from tinyformer.fake_device import ABSENT_FROM_CUPY, FakeArray, to_fake, xp

needs_cuda = pytest.mark.skipif(
    not cuda_available(), reason=f"needs CuPy and a CUDA GPU ({CUDA_INSTALL_HINT})"
)
DEVICES = ["cpu", "fake", pytest.param("cuda", marks=needs_cuda)]


def softmax(x):
    """A reference as the ops write them: the array module comes from the input."""
    xp = get_array_module(x)
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_with_host_math(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # the bug: np where xp belongs
    return e / e.sum(axis=-1, keepdims=True)


def data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Devices


@pytest.fixture
def fake_cupy(monkeypatch):
    """Install a stand-in `cupy` module (GPU count, current GPU, driver error) for one test."""

    def install(count=1, current=0, error=None):
        def get_device_count():
            if error is not None:
                raise error
            return count

        runtime = SimpleNamespace(getDeviceCount=get_device_count, getDevice=lambda: current)
        module = SimpleNamespace(cuda=SimpleNamespace(runtime=runtime), ndarray=type("nd", (), {}))
        monkeypatch.setitem(sys.modules, "cupy", module)
        return module

    backend._probe_cuda.cache_clear()
    yield install
    backend._probe_cuda.cache_clear()


@pytest.mark.parametrize(
    "spec, expected",
    [("cpu", Device("cpu")), ("fake", Device("fake")), ("fake:0", Device("fake", 0))],
)
def test_device_parses_and_prints_as_pytorch_does(spec, expected):
    d = device(spec)
    assert d == expected and str(d) == spec and device(d) is d


def test_no_device_means_the_cpu_and_cuda_devices_print_as_pytorch_does():
    assert device(None) == Device("cpu") and str(device(None)) == "cpu"
    assert str(Device("cuda")) == "cuda" and str(Device("cuda", 1)) == "cuda:1"
    assert repr(Device("cuda", 0)) == "Device(type='cuda', index=0)"


def test_unindexed_devices_mean_the_current_one(fake_cupy):
    assert Device("fake") == Device("fake", 0) and hash(Device("fake")) == hash(Device("fake", 0))
    assert Device("cpu") != Device("fake") and Device("cpu") != "cpu"
    fake_cupy(count=2, current=1)
    assert Device("cuda") == Device("cuda", 1) != Device("cuda", 0)
    assert hash(Device("cuda")) == hash(Device("cuda", 1))


@pytest.mark.parametrize(
    "spec", ["gpu", "CPU", "", " cpu", "cuda:", "cuda:x", "cuda:-1", "cuda 0", "cpu:0", "fake:1"]
)
def test_a_bad_device_spec_names_itself_and_the_valid_forms(spec):
    with pytest.raises(ValueError, match=re.escape(repr(spec)) + ".*expected 'cpu', 'cuda'"):
        device(spec)


@pytest.mark.parametrize("spec", [0, 1.5, b"cpu", ["cpu"]])
def test_a_device_spec_of_the_wrong_type_is_a_type_error(spec):
    with pytest.raises(TypeError, match="expected 'cpu'"):
        device(spec)


def test_device_fields_are_checked():
    for bad in [("tpu", None), ("cuda", -1), ("cuda", 1.0), ("cuda", True), ("cpu", 0)]:
        with pytest.raises(ValueError):
            Device(*bad)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_without_cupy_cuda_is_unavailable_and_the_error_says_how_to_install():
    assert cuda_available() is False
    for spec in ["cuda", "cuda:0", Device("cuda", 1)]:
        with pytest.raises(
            DeviceUnavailable, match="CuPy is not installed.*" + re.escape(CUDA_INSTALL_HINT)
        ):
            device(spec)
    with pytest.raises(DeviceUnavailable):
        to_device(np.zeros(2), "cuda")
    assert issubclass(DeviceUnavailable, RuntimeError)


@pytest.mark.parametrize(
    "install, why",
    [
        (dict(count=0), "CuPy sees no CUDA device"),
        (dict(error=RuntimeError("cudaErrorInsufficientDriver")), "driver.*InsufficientDriver"),
    ],
)
def test_each_reason_cuda_is_unavailable_is_reported(fake_cupy, install, why):
    fake_cupy(**install)
    assert cuda_available() is False  # never raises
    with pytest.raises(DeviceUnavailable, match=f"device 'cuda' is not available: .*{why}"):
        device("cuda")


def test_cupy_missing_is_reported(fake_cupy, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    assert cuda_available() is False
    with pytest.raises(DeviceUnavailable, match="CuPy is not installed"):
        array_module("cuda")


def test_cuda_devices_are_checked_against_the_gpu_count(fake_cupy):
    cupy = fake_cupy(count=2)
    assert cuda_available() and device("cuda:1") == Device("cuda", 1)
    assert array_module("cuda") is cupy
    with pytest.raises(DeviceUnavailable, match="'cuda:2' .* CuPy sees 2 GPU"):
        device("cuda:2")


def test_importing_backend_does_not_import_cupy(tmp_path):
    # A cupy that fails loudly when imported: importing tinyformer must not reach it, and
    # cuda_available() must reach it (so the sentinel is on the path) and report, not raise.
    (tmp_path / "cupy.py").write_text("raise RuntimeError('sentinel cupy was imported')\n")
    code = (
        "import sys, tinyformer, tinyformer.backend as b, tinyformer.fake_device\n"
        "assert 'cupy' not in sys.modules, 'cupy imported at import time'\n"
        "assert b.cuda_available() is False\n"
        "print(b._probe_cuda().why_not)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert "CuPy failed to import (sentinel cupy was imported)" in run.stdout


# ---------------------------------------------------------------------------------------------
# Array modules and moves, on every device


@pytest.mark.parametrize("where", DEVICES)
def test_a_reference_written_against_xp_gives_numpys_values_on_every_device(where):
    x = data(4, 7)
    y = softmax(to_device(x, where))
    assert device_of(y) == device(where) and is_device_array(y) == (where != "cpu")
    if where == "cuda":
        np.testing.assert_allclose(to_host(y), softmax(x), rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(to_host(y), softmax(x))  # the fake computes with NumPy


def test_the_fake_device_catches_a_reference_that_calls_numpy():
    x = data(4, 7)
    np.testing.assert_array_equal(softmax_with_host_math(x), softmax(x))  # fine on the CPU
    with pytest.raises(TypeError, match="numpy.exp was called on a fake-device array"):
        softmax_with_host_math(to_fake(x))


@pytest.mark.parametrize("where", DEVICES)
def test_moves_copy_only_when_needed(where):
    x = data(2, 3)
    y = to_device(x, where)
    assert to_device(y, where) is y and to_device(y, device(where)) is y
    back = to_host(y)
    assert isinstance(back, np.ndarray) and to_host(back) is back
    np.testing.assert_array_equal(back, x)
    if where != "cpu":
        back[0, 0] = 99.0  # a device array and its host copy share no memory
        assert to_host(y)[0, 0] == x[0, 0]
        assert to_device(y, "cpu") is not x and to_device([1.0, 2.0], where).shape == (2,)


def test_get_array_module_lets_a_device_array_decide():
    h, f = data(2), to_fake(data(2))
    assert get_array_module(h) is np and get_array_module() is np
    assert get_array_module(2.0, None, np.float32(1)) is np
    assert get_array_module(f) is xp and get_array_module(h, 3.0, None, f) is xp
    assert array_module("cpu") is np and array_module("fake") is xp


def test_device_of_and_is_device_array():
    assert device_of(data(2)) == Device("cpu") and device_of(np.float32(1)) == Device("cpu")
    f = to_fake(data(2))
    assert device_of(f) == Device("fake", 0) and str(device_of(f)) == "fake:0"
    assert is_device_array(f) and not is_device_array(data(2)) and not is_device_array(1.0)
    with pytest.raises(TypeError, match="device_of: expected"):
        device_of([1.0])


def test_check_same_device_names_the_op_and_both_devices():
    h, f = data(2), to_fake(data(2))
    assert check_same_device("add", f, None, 2.0, np.float32(3), f) == Device("fake", 0)
    assert check_same_device("add", h, h) == Device("cpu") and check_same_device("add") is None
    msg = "matmul: expected all arrays on one device, got cpu and fake:0"
    with pytest.raises(ValueError, match=re.escape(msg)):
        check_same_device("matmul", h, f)


# ---------------------------------------------------------------------------------------------
# The fake device refuses implicit host conversions


def _host_plus_equals(x, xp):
    h = np.zeros(3, np.float32)
    h += x


def _plus_equals_host(x, xp):
    x += np.zeros(3, np.float32)


def _assign_host(x, xp):
    x[:] = np.ones(3, np.float32)


# (what, how, whether CuPy refuses it too: where it does not, the fake is stricter on purpose)
REFUSED = [
    ("np.asarray", lambda x, xp: np.asarray(x), True),
    ("np.array", lambda x, xp: np.array(x), True),
    ("np.ascontiguousarray", lambda x, xp: np.ascontiguousarray(x), True),
    ("device + np.zeros", lambda x, xp: x + np.zeros(3), True),
    ("np.zeros + device", lambda x, xp: np.zeros(3) + x, True),
    ("device * 0-d host", lambda x, xp: x * np.array(2.0), True),
    ("0-d host * device", lambda x, xp: np.array(2.0, np.float32) * x, True),
    ("device < host", lambda x, xp: x < np.ones(3), True),
    ("host += device", _host_plus_equals, True),
    ("device += host", _plus_equals_host, True),
    ("device[:] = host", _assign_host, True),  # CuPy: ValueError
    ("np.lib.stride_tricks.as_strided", lambda x, xp: np.lib.stride_tricks.as_strided(x), True),
    ("writeable=", lambda x, xp: xp.lib.stride_tricks.as_strided(x, writeable=False), True),
    ("xp.maximum(device, host)", lambda x, xp: xp.maximum(x, np.zeros(3)), True),
    ("xp.where(.., host)", lambda x, xp: xp.where(x > 0, x, np.zeros(3)), True),
    ("xp.concatenate with host", lambda x, xp: xp.concatenate([x, np.zeros(3)]), True),
    ("range(0-d)", lambda x, xp: range(x.sum()), True),  # no __index__: a hidden sync
    ("np.exp", lambda x, xp: np.exp(x), False),
    ("np.zeros_like", lambda x, xp: np.zeros_like(x), False),
    ("np.concatenate", lambda x, xp: np.concatenate([x, x]), False),
    ("np.add.at", lambda x, xp: np.add.at(x, xp.asarray([0]), 1.0), False),
    ("host index array", lambda x, xp: x[np.array([0, 1])], False),
    ("xp.add.at, host indices", lambda x, xp: xp.add.at(x, np.array([0]), 1.0), False),
]


@pytest.mark.parametrize("what, how", [r[:2] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_the_fake_device_refuses_implicit_host_conversions(what, how):
    x = to_fake(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        how(x, xp)
    np.testing.assert_array_equal(x.get(), np.ones(3))  # and nothing was half-done


def test_refusals_say_what_to_do():
    x = to_fake(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=re.escape("Please use `.get()`")):
        np.asarray(x)
    with pytest.raises(TypeError, match="numpy.zeros_like .* xp.zeros_like"):
        np.zeros_like(x)
    with pytest.raises(TypeError, match=r"numpy.add.at .* xp.add.at"):
        np.add.at(x, xp.asarray([0]), 1.0)
    with pytest.raises(TypeError, match=r"xp.maximum: a host numpy.ndarray .* xp.asarray"):
        xp.maximum(x, np.zeros(3))


@pytest.mark.parametrize("name", ["errstate", "seterr", "nditer", "matrix", "insert"])
def test_names_cupy_lacks_are_absent(name):
    assert name in ABSENT_FROM_CUPY and hasattr(np, name) and not hasattr(xp, name)


def test_ufunc_methods_exist_where_cupy_has_them():
    x = to_fake(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(xp.add.reduce(x, axis=0).get(), [3.0, 5.0, 7.0])
    for unsupported in (lambda: xp.exp.at(x, 0), lambda: xp.maximum.reduce(x)):
        with pytest.raises(NotImplementedError, match="not supported by CuPy"):
            unsupported()


# ---------------------------------------------------------------------------------------------
# ... and otherwise computes as NumPy does


def _scatter_add(m, a, b, i):
    g = m.zeros_like(a)
    m.add.at(g, i, b)  # i repeats an index: the adds must accumulate
    return g


def _set_items(m, a, b, i):
    c = a.copy()
    c[i] = b[: len(i)]  # integer-array index
    c[0, 1:] = 7.0
    c[a > 1] = 0.0
    return c


SAME_AS_NUMPY = {
    "exp": lambda m, a, b, i: m.exp(a),
    "zeros_like": lambda m, a, b, i: m.zeros_like(a),
    "zeros": lambda m, a, b, i: m.zeros((3, 4), dtype=a.dtype) + a,
    "arange": lambda m, a, b, i: m.arange(4, dtype=a.dtype) * a,
    "where": lambda m, a, b, i: m.where(a > 0, a, b),
    "einsum": lambda m, a, b, i: m.einsum("ij,kj->ik", a, b),
    "matmul": lambda m, a, b, i: m.matmul(a, b.T) + a @ b.T,
    "maximum": lambda m, a, b, i: m.maximum(a, 0.0),
    "asarray": lambda m, a, b, i: a + m.asarray([1, 2, 3, 4], dtype=a.dtype),
    "add.at": _scatter_add,
    "setitem": _set_items,
    "as_strided": lambda m, a, b, i: m.lib.stride_tricks.as_strided(a, (3, 3), (16, 4)),
    "indexing": lambda m, a, b, i: a[i, None, ::2][..., 1] + a[a > 0].sum(),
    "newaxis": lambda m, a, b, i: a[:, m.newaxis] * m.pi + m.minimum(a, m.inf),
    "reductions": lambda m, a, b, i: a.sum(axis=0) + a.mean() + a.max(axis=-1).min() + a.var(),
    "more reductions": lambda m, a, b, i: a.argmax(axis=1) + a.std() + a.prod(axis=1) + a.any(),
    "cumsum": lambda m, a, b, i: a.cumsum(axis=1),
    "shapes": lambda m, a, b, i: a.reshape(4, 3).transpose(1, 0).swapaxes(0, 1).T,
    "astype": lambda m, a, b, i: a.astype(m.float64).copy(),
    "operators": lambda m, a, b, i: (2.0 - a) * np.float32(3) / b**2 + abs(-a) % 1.5,
    "numpy scalar on the left": lambda m, a, b, i: np.float32(3) * a - np.float32(1) / b,
    "comparisons": lambda m, a, b, i: (a > b) | (a == b) & (np.float32(0) <= a),
    "concatenate": lambda m, a, b, i: m.concatenate([a, b], axis=0),
    "0-d": lambda m, a, b, i: a[0, 0] + a.sum(),
}


@pytest.mark.parametrize("how", SAME_AS_NUMPY.values(), ids=SAME_AS_NUMPY.keys())
def test_the_fake_device_computes_as_numpy_does(how):
    a, b, i = data(3, 4), data(3, 4, seed=1), np.array([0, 2, 2])
    expected = np.asarray(how(np, a, b, i))
    got = how(xp, to_fake(a), to_fake(b), to_fake(i))
    assert isinstance(got, FakeArray) and got.dtype == expected.dtype
    np.testing.assert_array_equal(got.get(), expected)


def test_fake_arrays_behave_as_cupy_arrays_do():
    x = to_fake(np.arange(6, dtype=np.float32).reshape(2, 3))
    total = x.sum()
    assert isinstance(total, FakeArray) and total.shape == ()  # 0-d on the device, not a scalar
    assert float(total) == 15.0 and total.item() == 15.0 and int(x[1, 2]) == 5 and bool(total)
    assert len(x) == 2 and [row.shape for row in x] == [(3,), (3,)] and x.device.id == 0
    assert repr(x).endswith("dtype=float32, device='fake:0')") and f"{total:.1f}" == "15.0"
    for protocol in (len, iter):
        with pytest.raises(TypeError):
            protocol(total)
    assert (x.shape, x.ndim, x.size, x.strides, x.itemsize, x.nbytes) == (
        (2, 3),
        2,
        6,
        (12, 4),
        4,
        24,
    )
    assert x.flags.c_contiguous and not x.T.flags.c_contiguous and isinstance(x, xp.ndarray)
    assert xp.float32 is np.float32 and xp.finfo(x.dtype).eps == np.finfo(np.float32).eps
    assert xp.iinfo(xp.int8).max == 127 and xp.dtype("float32") == x.dtype
    assert xp.result_type(x, 1.0) == np.float32


def test_views_in_place_ops_and_out_share_device_memory():
    x = to_fake(np.zeros((2, 3), np.float32))
    row = x[0]
    row += 1.0
    x[1, :] = to_fake(np.full(3, 2.0, np.float32))
    assert xp.add(x, 1.0, out=x) is x
    np.testing.assert_array_equal(x.get(), [[2, 2, 2], [3, 3, 3]])


def test_explicit_moves_copy():
    h = np.ones(3, np.float32)
    a, b = xp.asarray(h), to_fake(h)
    h[0] = 5.0
    g = a.get()
    g[1] = 7.0
    np.testing.assert_array_equal(a.get(), [1, 1, 1])
    np.testing.assert_array_equal(b.get(), [1, 1, 1])
    assert xp.asarray(a) is not a and xp.asarray(a, dtype=np.float64).dtype == np.float64


# ---------------------------------------------------------------------------------------------
# The fake's claims, checked against CuPy where a GPU is present


@needs_cuda
@pytest.mark.parametrize(
    "what, how", [r[:2] for r in REFUSED if r[2]], ids=[r[0] for r in REFUSED if r[2]]
)
def test_cupy_refuses_what_the_fake_says_it_refuses(what, how):
    import cupy

    x = cupy.ones(3, dtype=cupy.float32)
    with pytest.raises((TypeError, ValueError)):  # `x[:] = host` is a ValueError in CuPy
        how(x, cupy)


@needs_cuda
def test_cupy_lacks_the_names_the_fake_lacks_and_reduces_to_0d_arrays():
    import cupy

    assert sorted(name for name in ABSENT_FROM_CUPY if hasattr(cupy, name)) == []
    x = cupy.arange(6, dtype=cupy.float32).reshape(2, 3)
    assert isinstance(x.sum(), cupy.ndarray) and x.sum().shape == () and x[0, 0].shape == ()
    assert device_of(x) == Device("cuda", 0) == device("cuda") and str(device_of(x)) == "cuda:0"
    assert get_array_module(x) is cupy and to_device(x, "cuda") is x
    with pytest.raises(ValueError, match=re.escape("got cpu and cuda:0")):
        check_same_device("matmul", np.ones(3), x)
