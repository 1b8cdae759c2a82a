"""Process settings the kernels run best with, wherever tinyformer runs: a notebook, a script,
an assignment's cell, or the training commands.

Applied in the running process at the first dispatch (`registry`), never at import, and at
most once (docs/cli.md, "Process settings"):

- BLAS on one thread (through threadpoolctl). Linear's Numba kernel (kernels/numba/linear.py)
  splits each matrix product's rows over Numba's workers instead, so that one thread pool does
  all the work: with two pools on two cores, each must leave the cores to the other, and
  waking a sleeping worker is slow.
- Numba's OpenMP threading layer first, and on Linux its workers busy-wait long enough between
  kernels to catch the next kernel of a step (`GOMP_SPINCOUNT`, which libgomp reads once, when
  Numba loads it at its first parallel kernel), while the kernels run on the cores other
  processes leave idle (`tinyformer.cores`): a spinning worker on a core another process (a
  second notebook, a test run) wants would make every parallel kernel wait for a turn.
  Elsewhere the workers spin briefly and the kernels use every thread.
- glibc keeps up to 256 MiB of freed memory (`mallopt`), so that each step's fresh arrays reuse
  it instead of faulting in new pages.

Your own settings win: a BLAS thread variable (`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS`, ...),
a BLAS thread count you set (threadpoolctl) below the number of CPUs, `GOMP_SPINCOUNT`,
`NUMBA_THREADING_LAYER`, `MALLOC_*_` variables. `TINYFORMER_THREADS=keep` leaves BLAS, the
threading layer and malloc as they are (the OpenMP workers spin briefly, and the kernels use
every thread); `TINYFORMER_THREADS=all` applies every setting but has the kernels use every
thread whatever other processes do, with the brief spin.

Only two settings need a fresh process (glibc and OpenBLAS read them at start-up): the training
commands and `python -m benchmarks` restart themselves once with `RUNTIME_ENV`.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from typing import Any

from tinyformer import cores

__all__ = [
    "BENCH_ENV",
    "RUNTIME_ENV",
    "THREADS_VAR",
    "apply_settings",
    "blas_controllers",
    "describe",
    "on_one_thread",
    "restart_with_runtime_env",
    "settings",
]

THREADS_VAR = "TINYFORMER_THREADS"  # "keep": leave the process's settings as they are
# Variables through which a user sets BLAS's threads (OpenBLAS reads OMP_NUM_THREADS too).
BLAS_THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
)
# Spins of an idle OpenMP worker before it sleeps. Where `cores` can see what other processes
# use (Linux), the kernels run on the cores they leave idle, so the workers may spin long enough
# to catch every kernel of a step. Elsewhere, and with TINYFORMER_THREADS=keep or all, briefly: long
# spins beside a busy process make every kernel wait for a turn (benchmarks/spin_under_load.py).
SPIN_SHARED = "100000"
SPIN = "1000"
MALLOC_KEEP = 256 * 2**20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MALLOC_VARS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

# Read only when a process starts, so applied by the restart of the training commands:
# - glibc asks the kernel for 2 MiB pages for its heap, so far fewer address translations miss
#   the TLB (glibc before 2.35 ignores the tunable).
# - Should BLAS keep several threads (your own setting), its workers would busy-wait ~0.1 s
#   after each product by default, holding the core the Numba kernels that follow need.
RUNTIME_ENV = {
    "OPENBLAS_THREAD_TIMEOUT": "6",
    "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
}
# The kernel benchmarks compare each kernel with its NumPy reference, whose matrix products
# use BLAS's own threads: BLAS keeps them, and the malloc thresholds come from the environment.
BENCH_ENV = {
    **RUNTIME_ENV,
    THREADS_VAR: "keep",
    **{name: str(MALLOC_KEEP) for name in MALLOC_VARS},
}

_RESTARTED = "TINYFORMER_RESTARTED"  # set in the restarted process
_applied: dict[str, str] = {}  # setting -> what was done about it, filled by apply_settings()


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def blas_controllers() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded, SciPy's (the one Numba's np.dot
    calls) loaded first so that it is among them."""
    from threadpoolctl import ThreadpoolController

    if importlib.util.find_spec("scipy") is not None:
        import scipy.linalg.cython_blas  # noqa: F401
    return list(ThreadpoolController().select(user_api="blas").lib_controllers)


def _apply_blas(keep: bool) -> str:
    user_vars = [f"{v}={os.environ[v]}" for v in BLAS_THREAD_VARS if v in os.environ]
    if keep:
        return f"left as they are ({THREADS_VAR}=keep)"
    if user_vars:
        return f"left as you set them ({', '.join(user_vars)})"
    cpus, changed, kept = _usable_cpus(), [], []
    for lib in blas_controllers():
        threads = lib.get_num_threads()
        if threads >= cpus > 1:  # the library's default: all the CPUs
            lib.set_num_threads(1)
            changed.append(lib.internal_api)
        elif threads > 1:  # fewer than the CPUs: someone chose this number
            kept.append(f"{lib.internal_api} on {threads}")
    if kept:
        return f"left as you set them ({', '.join(kept)})"
    return f"set to 1 thread ({', '.join(changed)})" if changed else "already on 1 thread"


def _numba_layer_loaded() -> bool:
    """Whether Numba has loaded its threading layer (and with it, for OpenMP, libgomp)."""
    if "numba" not in sys.modules:
        return False
    from numba.np.ufunc import parallel

    return bool(parallel._is_initialized)


def _apply_spin(shared: bool) -> str:
    if "GOMP_SPINCOUNT" in os.environ:
        return f"GOMP_SPINCOUNT={os.environ['GOMP_SPINCOUNT']} (yours)"
    # Other libraries' OpenMP runtimes do not matter (PyTorch's wheel brings its own libgomp);
    # Numba's libgomp reads the variable when Numba loads it, at its first parallel kernel.
    if _numba_layer_loaded():
        return "libgomp's default (Numba's threads started before tinyformer's first op)"
    spin = SPIN_SHARED if shared else SPIN
    os.environ["GOMP_SPINCOUNT"] = spin
    why = "kernels use the cores other processes leave idle" if shared else "short"
    return f"GOMP_SPINCOUNT={spin} ({why})"


def _apply_layer(keep: bool) -> str:
    if importlib.util.find_spec("numba") is None:
        return "numba is not installed"
    import numba

    mine = [
        v for v in ("NUMBA_THREADING_LAYER", "NUMBA_THREADING_LAYER_PRIORITY") if v in os.environ
    ]
    if keep or mine or numba.config.THREADING_LAYER != "default":
        return f"numba's choice ({', '.join(mine) or 'left as it is'})"
    # The spin count above and every timing in docs/kernels.md are OpenMP's; numba would take
    # TBB first where it is installed.
    numba.config.THREADING_LAYER_PRIORITY = ["omp", "tbb", "workqueue"]
    return "omp preferred, then tbb, workqueue"


def _apply_malloc(keep: bool) -> str:
    mine = [f"{v}={os.environ[v]}" for v in MALLOC_VARS if v in os.environ]
    if mine:
        return f"from the environment ({', '.join(mine)})"
    if keep:
        return f"glibc's defaults ({THREADS_VAR}=keep)"
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return "the C library's defaults (not glibc)"
    libc = ctypes.CDLL(None)
    # Both thresholds: fixing only the mmap one also stops glibc's adaptive trimming.
    done = libc.mallopt(_M_TRIM_THRESHOLD, MALLOC_KEEP) and libc.mallopt(
        _M_MMAP_THRESHOLD, MALLOC_KEEP
    )
    return f"glibc keeps up to {MALLOC_KEEP >> 20} MiB freed" if done else "mallopt refused"


_numba_threads: list = []  # Numba's own (get, set) of the calling thread's count, once launched


def on_threads(n: int, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` with Numba's thread count at most `n` for the calling thread, then
    put back: its parallel kernels then wake no more than n - 1 workers (the registry's small
    calls run on one thread; see `cores` for the rest). Numba's count is per calling thread,
    so other threads keep theirs."""
    if not _numba_threads:
        from numba.np.ufunc import parallel

        parallel._launch_threads()  # the pool, as the first parallel kernel would start it
        # The threading layer's C functions that numba.get/set_num_threads call after their
        # checks: a call here is a fraction of a microsecond instead of a few.
        _numba_threads[:] = [parallel._get_num_threads, parallel._set_num_threads]
    get, set_ = _numba_threads
    threads = get()
    if threads <= n:
        return fn(*args, **kwargs)
    set_(n)
    try:
        return fn(*args, **kwargs)
    finally:
        set_(threads)


def on_one_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` on the calling thread alone (`on_threads(1, ...)`)."""
    return on_threads(1, fn, *args, **kwargs)


def apply_settings() -> dict[str, str]:
    """Apply the settings once (the registry calls this at the first dispatch); returns what
    was done about each, as `settings()` does."""
    if not _applied:
        choice = os.environ.get(THREADS_VAR, "").strip().lower()
        if choice not in ("", "keep", "all"):
            raise ValueError(
                f"environment variable {THREADS_VAR}: unknown value {os.environ[THREADS_VAR]!r}; "
                "set it to 'keep' or 'all', or leave it unset"
            )
        keep = choice == "keep"
        _applied["blas"] = _apply_blas(keep)
        shared = not choice and cores.measure() is not None  # Linux, unless keep or all
        cores.enable(shared)
        _applied["openmp spin"] = _apply_spin(shared)
        _applied["numba layer"] = _apply_layer(keep)
        _applied["malloc"] = _apply_malloc(keep)
    return dict(_applied)


def settings() -> dict[str, str]:
    """What this process runs with now: BLAS libraries and their threads, Numba's threading
    layer and threads, and what `apply_settings` did ({} entries until it ran)."""
    now = {f"applied: {k}": v for k, v in _applied.items()}
    if importlib.util.find_spec("threadpoolctl") is not None:
        from threadpoolctl import ThreadpoolController

        libs = ThreadpoolController().select(user_api="blas").lib_controllers
        now["blas"] = ", ".join(f"{c.internal_api} on {c.get_num_threads()}" for c in libs) or (
            "none loaded yet"
        )
    if "numba" in sys.modules:
        numba = sys.modules["numba"]
        launched = _numba_layer_loaded()
        layer = numba.threading_layer() if launched else "chosen at the first parallel kernel"
        now["numba"] = (
            f"{numba.__version__}, layer {layer}, {numba.config.NUMBA_NUM_THREADS} threads"
        )
    now["GOMP_SPINCOUNT"] = os.environ.get("GOMP_SPINCOUNT", "unset")
    return now


def describe() -> list[str]:
    """`settings()` as lines for `tinyformer explain` and `tinyformer doctor`."""
    return [f"{name}: {value}" for name, value in settings().items()]


def restart_with_runtime_env(module: str, env: dict[str, str] = RUNTIME_ENV) -> None:
    """Run `python -m module` again, with the same arguments, in a fresh process with `env` set
    (RUNTIME_ENV by default; values already in the environment are kept). These settings are
    read only when a process starts, so a restart is the only way to apply them; call this only
    from a program's entry point, never from a library function (it replaces the running
    process). In the restarted process it returns at once."""
    if _RESTARTED in os.environ:  # this process is the restart: run on
        return
    for name, value in env.items():
        os.environ.setdefault(name, value)
    os.environ[_RESTARTED] = "1"
    os.execv(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]])
