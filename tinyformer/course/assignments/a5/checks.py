"""A5's property tests (shipped to students) and hidden tests (removed by every release).

The grader runs each test itself: `tf.course.assignments.a5.drivers` runs the student's kernels
in the task's child process, on arrays laid out and placed as a test asks, and returns host arrays,
which the test judges here. `PROPERTIES` and `HIDDEN` map a task id to its tests. The "kernel"
check (the kernel against the NumPy reference on random inputs) is the grader's own; these tests
add what a comparison on standard-normal inputs does not reach.

Each test calls the student's wrapper in `kernels.py` beside this file (A5.1, A5.2) or
`cuda.py` (A5.3) directly (not through the registry), and only its own task's kernel: the
backward tests take y from SciPy's softmax, so a wrong forward kernel costs A5.2 nothing.
All inputs are float32 or float64 and go through the wrappers' read-only rows, so the tests add
no compile to the kernel check's. A5.3's tests run the CUDA kernel on the fake device (the CPU
emulator, on every machine) and on the GPU where CuPy sees one.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

__all__ = ["PROPERTIES"]


def _drivers(tf: ModuleType):
    """The student's kernels, run in the grader's child (`drivers.py`)."""
    return tf.course.assignments.a5.drivers


def _text(a: np.ndarray) -> str:
    """A driver's string, sent as UTF-8 bytes (the grader's pipe carries numbers only)."""
    return bytes(np.asarray(a).astype(np.uint8)).decode("utf-8", "replace")


def _devices(tf: ModuleType) -> list[str]:
    return ["fake", "cuda"] if tf.cuda.is_available() else ["fake"]


def _cuda_softmax(tf: ModuleType, x: np.ndarray, device: str) -> np.ndarray:
    """The student's CUDA softmax of host array x, run on `device`, back on the host."""
    y, where, _ = _drivers(tf).cuda_forward(x, device)
    where = _text(where)
    assert where == device, f"the result is on {where}, not on {device}"
    return y


def _reference_softmax(x: np.ndarray) -> np.ndarray:
    # SciPy's, not the tree's: in a release, the tree's softmax is the student's A2.1 (a stub
    # until they carry it over with `sync`), and A5 must grade on its own.
    from scipy.special import softmax

    return softmax(x, axis=-1).astype(x.dtype, copy=False)


def forward_rows_sum_to_one_in_the_input_dtype(tf: ModuleType) -> None:
    """float32 in, float32 out, of x's shape; every row sums to 1 and x is left as it was."""
    x = np.random.default_rng(0).normal(size=(2, 64, 100)).astype(np.float32)
    y, after = _drivers(tf).forward(x)
    assert y.dtype == np.float32 and y.shape == x.shape, f"got {y.dtype} {y.shape}"
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5)
    assert (y >= 0).all(), "a probability is negative"
    np.testing.assert_array_equal(after, x, err_msg="the kernel changed its input")
    np.testing.assert_allclose(y, _reference_softmax(x), atol=1e-6, rtol=0)


def backward_rows_sum_to_zero(tf: ModuleType) -> None:
    """The gradient of <softmax(x), gy>: it equals central differences of SciPy's softmax, and
    its rows sum to 0 (shifting every logit of a row by the same amount changes no output)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(8, 50))
    y, gy = _reference_softmax(x), rng.normal(size=x.shape)
    gx = _drivers(tf).backward(gy, y)
    assert gx.dtype == y.dtype and gx.shape == y.shape, f"got {gx.dtype} {gx.shape}"
    np.testing.assert_allclose(gx.sum(axis=-1), 0.0, atol=1e-12)
    # and it is the gradient of <softmax(x), gy>: central differences of SciPy's softmax
    h, want = 1e-6, np.zeros_like(x)
    for j in range(x.shape[1]):
        step = np.zeros_like(x)
        step[:, j] = h
        up, down = _reference_softmax(x + step), _reference_softmax(x - step)
        want[:, j] = ((up - down) * gy).sum(axis=-1) / (2 * h)
    np.testing.assert_allclose(gx, want, atol=1e-8, err_msg="not the gradient of softmax")


def cuda_rows_sum_to_one_in_the_input_dtype(tf: ModuleType) -> None:
    """On each device: float32 in, float32 out, of x's shape (3-D, rows of 300 > one block of
    256 threads); every row sums to 1 and x is left as it was."""
    x = np.random.default_rng(4).normal(size=(2, 3, 300)).astype(np.float32)
    for device in _devices(tf):
        y, where, after = _drivers(tf).cuda_forward(x, device)
        where = _text(where)
        assert where == device, f"the result is on {where}, not on {device}"
        assert y.dtype == np.float32 and y.shape == x.shape, f"{device}: got {y.dtype} {y.shape}"
        np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-5, err_msg=device)
        assert (y >= 0).all(), f"{device}: a probability is negative"
        assert (after == x).all(), f"{device}: the kernel changed its input"
        np.testing.assert_allclose(y, _reference_softmax(x), atol=1e-6, rtol=0, err_msg=device)


def cuda_kernel_compiles_with_nvrtc(tf: ModuleType) -> str | None:
    """NVRTC, the compiler CuPy uses on a GPU, compiles softmax.cu for A100 and H100/H200
    (sm_80, sm_90) with no GPU: it rejects what the host compiler of the emulator may accept
    (INFINITY, for one). Where the nvidia-cuda-nvrtc wheel is missing, passes with a note."""
    return _text(_drivers(tf).compile_cuda())


PROPERTIES = {
    "A5.1": [forward_rows_sum_to_one_in_the_input_dtype],
    "A5.2": [backward_rows_sum_to_zero],
    "A5.3": [cuda_rows_sum_to_one_in_the_input_dtype, cuda_kernel_compiles_with_nvrtc],
}


### BEGIN HIDDEN TESTS A5
def forward_huge_and_masked_logits(tf: ModuleType) -> None:
    """Logits of ±1e4 (exp overflows without the max), -inf entries (masked scores) that must
    give exactly 0, and a row whose max is its last element."""
    rng = tf.rng
    for dtype in (np.float32, np.float64):
        x = (rng.normal(size=(6, 40)) * 1e4).astype(dtype)
        x[1, ::3] = -np.inf
        x[2] = np.arange(40, dtype=dtype)  # increasing: the max sits at the end
        y, _ = _drivers(tf).forward(x)
        assert np.isfinite(y).all(), f"{dtype.__name__}: not finite for logits of 1e4"
        assert (y[1, ::3] == 0).all(), "a -inf logit must have probability exactly 0"
        tol = 1e-6 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(y, _reference_softmax(x), atol=tol, rtol=0)


def backward_with_a_broadcast_gradient(tf: ModuleType) -> None:
    """gy broadcast from one row (a read-only view, stride 0) and a transposed y: the wrapper
    must lay both out as rows before the kernel reads them."""
    rng = tf.rng
    y = np.ascontiguousarray(_reference_softmax(rng.normal(size=(30, 7)))).T.copy().T  # F order
    row = rng.normal(size=(1, 7))
    gx = _drivers(tf).backward_broadcast(row, y)  # gy: the row broadcast, in the child
    gy = np.broadcast_to(row, y.shape)
    want = y * (gy - (gy * y).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(gx, want, atol=1e-12, rtol=1e-10)


def cuda_huge_masked_and_long_rows(tf: ModuleType) -> None:
    """On each device, in both dtypes: logits of ±1e4, -inf entries that must give exactly 0
    (in a row longer than the block, and a row masked but for its first column), a row whose
    max is its last element, rows of 1100, 257 and 31 columns, and rows of 1 column."""
    rng = tf.rng
    for dtype in (np.float32, np.float64):
        x = (rng.normal(size=(6, 1100)) * 1e4).astype(dtype)
        x[1, ::3] = -np.inf
        x[2, 1:] = -np.inf  # one logit left: its probability is exactly 1
        x[3] = np.arange(1100, dtype=dtype)  # increasing: the max sits at the end
        tol = 1e-6 if dtype == np.float32 else 1e-12
        for device in _devices(tf):
            for cols in (1100, 257, 31):
                a = np.ascontiguousarray(x[:, :cols])
                y, want = _cuda_softmax(tf, a, device), _reference_softmax(a)
                where = f"{device} {dtype.__name__} {a.shape}"
                assert np.isfinite(y).all(), f"{where}: not finite for logits of 1e4"
                np.testing.assert_allclose(y, want, atol=tol, rtol=0, err_msg=where)
                assert (y[1, ::3] == 0).all(), f"{where}: a -inf logit must have probability 0"
                assert y[2, 0] == 1, f"{where}: the one logit left must have probability 1"
            y = _cuda_softmax(tf, x[[0, 2, 3, 4, 5], :1], device)  # row 1 starts with -inf
            assert (y == 1).all(), f"{device} {dtype.__name__}: a row of 1 column gives 1"


HIDDEN = {
    "A5.1": [forward_huge_and_masked_logits],
    "A5.2": [backward_with_a_broadcast_gradient],
    "A5.3": [cuda_huge_masked_and_long_rows],
}
### END HIDDEN TESTS
