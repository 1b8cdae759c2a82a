"""`tinyformer launch -n N -- ARGS...`: start N ranks of `tinyformer ARGS...` with the MPI
launcher that came with the MPI wheel (as torchrun does for PyTorch). Each rank gets an equal
share of the cores for its threads, so that N ranks do not oversubscribe the machine."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tinyformer.distributed.process_group import MPI_INSTALL_HINT, DistributedError

__all__ = [
    "add_launch_command", "find_mpiexec", "launch_command", "run_launch_command",
    "threads_per_rank",
]  # fmt: skip


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


def add_launch_command(sub: Any) -> None:
    """`tinyformer launch` on the command line's subcommands."""
    from tinyformer.train.args import COUNT, ranged

    launch = sub.add_parser(
        "launch",
        help="run a command on N processes (data parallel, over MPI)",
        description="Starts N ranks of `tinyformer ARGS...` with the MPI launcher of the mpi "
        'extra (pip install -e ".[mpi]"), e.g. `tinyformer launch -n 2 -- train gpt`. The '
        "same as `mpiexec -n N tinyformer ARGS...`, with each rank's threads set to its share "
        "of the cores.",
    )
    launch.add_argument("-n", "--nproc", type=ranged(int, COUNT), default=2, help="ranks (2)")
    launch.add_argument("args", nargs=argparse.REMAINDER, help="-- then the command to run")


def run_launch_command(ranks: int, rest: list[str]) -> int:
    """Run `tinyformer REST` on `ranks` ranks; its exit status, or 2 when it cannot start."""
    try:
        cmd, env = launch_command(ranks, rest[1:] if rest[:1] == ["--"] else rest)
    except DistributedError as err:
        print(f"tinyformer launch: error: {err}", file=sys.stderr)
        return 2
    return subprocess.run(cmd, env=env).returncode
