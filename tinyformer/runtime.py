"""Process settings the training commands run with (`tinyformer train ...` restarts itself
once to apply them; the benchmarks apply them to both frameworks).
"""

__all__ = ["RUNTIME_ENV"]

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
