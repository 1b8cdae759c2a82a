"""Whether kernels may call BLAS from each of Numba's workers (no kernels here)."""

from __future__ import annotations

import importlib.util

from tinyformer.runtime import blas_controllers

_blas: dict = {}  # "controllers": threadpoolctl's, of the BLAS libraries (found at first use)


def blas_libraries() -> list:
    """threadpoolctl's controllers of every BLAS library loaded, SciPy's (the one Numba's np.dot
    calls) among them; [] without SciPy."""
    if "controllers" not in _blas:
        has_scipy = importlib.util.find_spec("scipy") is not None
        _blas["controllers"] = blas_controllers() if has_scipy else []
    return _blas["controllers"]


def blas_one_thread() -> bool:
    """Every BLAS library loaded runs on one thread (as `runtime.apply_settings` leaves them
    unless you chose otherwise), so kernels may call BLAS from each of Numba's workers. False
    without SciPy, whose BLAS Numba's np.dot calls."""
    controllers = blas_libraries()
    return bool(controllers) and all(c.get_num_threads() == 1 for c in controllers)
