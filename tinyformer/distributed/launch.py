"""`tinyformer launch -n N -- ARGS...`: start N ranks of `tinyformer ARGS...` with the MPI
launcher that came with the MPI wheel (as torchrun does for PyTorch). Each rank gets an equal
share of the cores for its threads, so that N ranks do not oversubscribe the machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tinyformer.distributed.process_group import MPI_INSTALL_HINT, DistributedError

__all__ = ["find_mpiexec", "launch_command", "threads_per_rank"]


def find_mpiexec() -> str:
    """The `mpiexec` beside this Python (a virtualenv's, from the mpich wheel), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if found is None:
        raise DistributedError(
            f"no mpiexec found beside {sys.executable} or on PATH: {MPI_INSTALL_HINT}"
        )
    return found


def threads_per_rank(ranks: int, cores: int | None = None) -> int:
    cores = cores or os.cpu_count() or 1
    return max(1, cores // ranks)


def launch_command(ranks: int, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start `ranks` copies of `tinyformer args`."""
    if ranks < 1:
        raise DistributedError(f"launch: -n must be >= 1, got {ranks}")
    if not args:
        raise DistributedError("launch: give the command to run after --, e.g. -- train gpt")
    threads = str(threads_per_rank(ranks))
    env = {**os.environ, "NUMBA_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
    cmd = [find_mpiexec(), "-n", str(ranks), sys.executable, "-m", "tinyformer.cli", *args]
    return cmd, env
