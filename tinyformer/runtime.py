"""Process settings the training commands run with (`tinyformer train ...` and
`python -m tinyformer.bench` restart themselves once to apply them; the PyTorch side-by-side
benchmarks apply them to both frameworks).
"""

import os
import sys

__all__ = ["RUNTIME_ENV", "restart_with_runtime_env"]

# Process settings for the training commands, read only at start-up (docs/cli.md):
# - OpenBLAS's worker threads busy-wait ~2**28 cycles (~0.1 s) after each matrix product by
#   default, holding the second core while the Numba kernels that follow need it.
# - glibc returns freed arrays above 128 KiB to the OS at once, so every step's fresh arrays
#   page-fault in again; keeping up to 256 MiB in the heap reuses that memory instead. Both
#   thresholds are needed: fixing only the mmap threshold also turns off glibc's own adaptive
#   trimming, which is slower than either.
RUNTIME_ENV = {
    "OPENBLAS_THREAD_TIMEOUT": "6",
    "MALLOC_MMAP_THRESHOLD_": str(256 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
}


_RESTARTED = "TINYFORMER_RESTARTED"  # set in the restarted process


def restart_with_runtime_env(module: str) -> None:
    """Run `python -m module` again, with the same arguments, in a fresh process with RUNTIME_ENV
    set (values already in the environment are kept). The settings are read only when a process
    starts, so a restart is the only way to apply them; call this only from a program's entry
    point, never from a library function (it replaces the running process). In the restarted
    process it returns at once."""
    if _RESTARTED in os.environ:  # this process is the restart: run on
        return
    for name, value in RUNTIME_ENV.items():
        os.environ.setdefault(name, value)
    os.environ[_RESTARTED] = "1"
    os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
