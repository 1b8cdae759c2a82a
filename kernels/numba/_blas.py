"""Whether kernels may call BLAS from each of Numba's workers (no kernels here)."""

from __future__ import annotations

_blas: dict = {}  # "controllers": threadpoolctl's, of the BLAS libraries (found at first use)


def blas_libraries() -> list:
    """threadpoolctl's controllers of every BLAS library loaded, SciPy's (the one Numba's np.dot
    calls) loaded first so that it is among them; [] without SciPy."""
    if "controllers" not in _blas:
        try:
            import scipy.linalg.cython_blas  # noqa: F401  (the BLAS Numba's np.dot calls)
            from threadpoolctl import ThreadpoolController
        except ImportError:  # no SciPy: Numba's np.dot cannot run; the reference will
            _blas["controllers"] = []
        else:
            found = ThreadpoolController().select(user_api="blas").lib_controllers
            _blas["controllers"] = list(found)
    return _blas["controllers"]


def blas_one_thread() -> bool:
    """Every BLAS library loaded runs on one thread (OPENBLAS_NUM_THREADS=1, as the training
    commands set), so kernels may call BLAS from each of Numba's workers. False without SciPy,
    whose BLAS Numba's np.dot calls."""
    controllers = blas_libraries()
    return bool(controllers) and all(c.get_num_threads() == 1 for c in controllers)
