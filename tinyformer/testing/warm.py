"""Compile every kernel once, in one process: `python -m tinyformer.testing.warm`.

Numba (`cache=True`) and the CUDA emulator keep what they compile on disk, and a warm cache loads
in a fraction of a second. Test workers running side by side (`pytest -n 2`) on a cold cache
would each compile their own copy, and two processes saving different signatures of one Numba
function at the same moment can both claim the same data file of its index, leaving an entry
that loads the wrong machine code. Running this first, in one process, leaves them only loading.

It runs `check_backend` once per op with kernels, backend and dtype (float32 and float64), the
calls the generic op suite makes. A check that fails here is only counted: the tests report it.
"""

from __future__ import annotations

import numpy as np

from tinyformer.testing import RandomDraw, all_specs
from tinyformer.testing.checks import check_backend, kernel_backends

__all__ = ["warm"]


def warm() -> tuple[int, int]:
    """Compile (or load) every registered kernel in float32 and float64: (checks run, checks
    that failed)."""
    runs = failed = 0
    for spec in all_specs():
        for backend in kernel_backends(spec):
            for dtype in (np.float32, np.float64):
                runs += 1
                try:
                    check_backend(spec, backend, dtype, RandomDraw(0))
                except Exception:  # a wrong or broken kernel: the test suite says which and why
                    failed += 1
    return runs, failed


if __name__ == "__main__":
    runs, failed = warm()
    note = f" ({failed} failed: the tests will say why)" if failed else ""
    print(f"kernels compiled or loaded from cache: {runs} op/backend/dtype checks{note}")
