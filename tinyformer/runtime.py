"""Process settings the training commands run with (`tinyformer train ...` and
`python -m benchmarks` restart themselves once to apply them; the PyTorch side-by-side
benchmarks apply them to both frameworks).
"""

import os
import sys

__all__ = ["BENCH_ENV", "RUNTIME_ENV", "restart_with_runtime_env"]

# Process settings for the training commands, read only at start-up (docs/cli.md):
# - One thread pool for all the work. BLAS runs on one thread, and linear's Numba kernel
#   (kernels/numba/linear.py) splits each matrix product over Numba's OpenMP workers instead.
#   With two pools on two cores, each had to leave the cores to the other, and waking a
#   sleeping worker costs tens of microseconds here, ~140 times a step: the baby GPT's step
#   went from 46 to ~38 ms. With no other pool to starve, the workers busy-wait longer between
#   kernels (libgomp's spin count; the library's own default, without these settings, is
#   10,000: registry._OPENMP_ENVIRONMENT).
# - Should BLAS run on several threads after all (a user's OPENBLAS_NUM_THREADS wins), its
#   workers would busy-wait ~2**28 cycles (~0.1 s) after each product by default, holding the
#   second core while the Numba kernels that follow need it: the timeout shortens that.
# - glibc returns freed arrays above 128 KiB to the OS at once, so every step's fresh arrays
#   page-fault in again; keeping up to 256 MiB in the heap reuses that memory instead. Both
#   thresholds are needed: fixing only the mmap threshold also turns off glibc's own adaptive
#   trimming, which is slower than either.
# - glibc asks the kernel for 2 MiB pages for its heap (transparent huge pages in "madvise"
#   mode, the usual default): a step's arrays then sit on 2 MiB pages instead of 4 KiB ones,
#   so far fewer address translations miss the TLB; the baby GPT's step is ~3% faster. glibc
#   before 2.35 ignores the tunable.
RUNTIME_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "GOMP_SPINCOUNT": "100000",
    "OPENBLAS_THREAD_TIMEOUT": "6",
    "MALLOC_MMAP_THRESHOLD_": str(256 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(256 * 2**20),
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
}


# The kernel benchmarks (`python -m benchmarks`) compare each kernel with its NumPy
# reference on two cores, so there BLAS keeps both threads (the references' matrix products
# use them) and OpenMP's workers spin briefly, as the library does without these settings.
BENCH_ENV = {
    name: value
    for name, value in RUNTIME_ENV.items()
    if name not in ("OPENBLAS_NUM_THREADS", "GOMP_SPINCOUNT")
}

_RESTARTED = "TINYFORMER_RESTARTED"  # set in the restarted process


def restart_with_runtime_env(module: str, env: dict[str, str] = RUNTIME_ENV) -> None:
    """Run `python -m module` again, with the same arguments, in a fresh process with `env` set
    (RUNTIME_ENV by default; values already in the environment are kept). The settings are read
    only when a process starts, so a restart is the only way to apply them; call this only from
    a program's entry point, never from a library function (it replaces the running process).
    In the restarted process it returns at once."""
    if _RESTARTED in os.environ:  # this process is the restart: run on
        return
    for name, value in env.items():
        os.environ.setdefault(name, value)
    os.environ[_RESTARTED] = "1"
    os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
