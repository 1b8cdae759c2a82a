"""A5's kernels driven by plain data: what the grader's child runs for A5's tests.

A kernel's subject includes what it does to its inputs and where its output lives, which a
copy of the arrays across the grader's pipe would hide. These functions run the student's
kernels in the child on arrays the grader sends, laid out and placed as the test asks, and
return host arrays (and where the result was, as UTF-8 bytes), which the grader judges
(`checks.py`, beside this file). They are no part of the assignment and hold no answer.
"""

from __future__ import annotations

import numpy as np

from tinyformer import backend

__all__ = ["backward", "backward_broadcast", "compile_cuda", "cuda_forward", "forward"]


def _text(s: str) -> np.ndarray:
    """A string as UTF-8 bytes in a uint8 array: the grader's pipe carries numbers only."""
    return np.frombuffer(s.encode("utf-8"), np.uint8).copy()


def _kernels():
    """The student's Numba kernels module; without Numba an error that says so."""
    try:
        import numba  # noqa: F401
    except ImportError as err:
        raise AssertionError(
            f"numba does not import in the grading environment ({err}): A5's kernels cannot "
            "run. Install it (`pip install numba`) and grade again."
        ) from None
    from tinyformer.course.assignments.a5 import kernels

    return kernels


def forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The student's Numba softmax forward of x -> (y, x afterwards)."""
    return _kernels().softmax_forward(x), x


def backward(gy: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The student's Numba softmax backward."""
    return _kernels().softmax_backward(gy, y)


def backward_broadcast(gy_row: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The student's Numba softmax backward with gy one row broadcast to y's shape (a
    read-only view of stride 0), y as it comes (Fortran order, say)."""
    return _kernels().softmax_backward(np.broadcast_to(gy_row, y.shape), y)


def cuda_forward(x: np.ndarray, device: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The student's CUDA softmax of x on `device` -> (y on the host, the device type y was
    on, x afterwards on the host)."""
    from tinyformer.course.assignments.a5 import cuda

    x_dev = backend.to_device(x, device)
    y = cuda.softmax_forward(x_dev)
    where = _text(backend.device_of(y).type)
    return backend.to_host(y), where, backend.to_host(x_dev)


def compile_cuda() -> np.ndarray:
    """softmax.cu compiled by NVRTC for each architecture -> a note for the report;
    AssertionError with NVRTC's log if it does not compile."""
    from tinyformer.course.assignments.a5 import cuda
    from tinyformer.kernels.cuda import _nvrtc

    source = cuda.source()  # the stub raises here, with or without NVRTC
    try:
        for arch in _nvrtc.ARCHITECTURES:
            _nvrtc.compile_cuda(source, cuda.SOURCE.name, arch=arch)
    except (_nvrtc.NvrtcUnavailable, OSError) as err:
        return _text(f"not compiled with NVRTC, which is not available here: {err}")
    except _nvrtc.CompileError as err:
        raise AssertionError(str(err)) from None
    return _text(f"compiles for {' and '.join(_nvrtc.ARCHITECTURES)}")
