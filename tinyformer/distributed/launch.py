"""`tinyformer launch -n N -- ARGS...`: start N ranks of `tinyformer ARGS...` with the MPI
launcher that came with the MPI wheel (as torchrun does for PyTorch). Each rank gets an equal
share of the cores for its threads, so that N ranks do not oversubscribe the machine.

Before any rank starts, the launcher reads the command as `tinyformer ARGS...` would (a bad
flag is said once, not by every rank), and refuses more ranks than cores (unless
--oversubscribe) and a batch that does not divide over the ranks. While they run, Ctrl-C (or
SIGTERM) is passed on to the ranks through mpiexec: they finish their step and save, and the
launcher prints how to continue and exits with 128 + the signal, as the commands do. When a
rank dies, the launcher names it, how it ended, the last checkpoint and the command that
resumes the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tinyformer.distributed.process_group import MPI_INSTALL_HINT, DistributedError
from tinyformer.flags import COUNT, ranged

__all__ = [
    "add_launch_command", "available_cores", "check_command", "check_ranks", "find_mpiexec",
    "launch_command", "resume_command", "run_launch_command", "threads_per_rank",
]  # fmt: skip

RANK_SCRIPT = Path(__file__).with_name("_rank.py")
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else all)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_per_rank(ranks: int, cores: int | None = None) -> int:
    cores = cores or os.cpu_count() or 1
    return max(1, cores // ranks)


def check_ranks(ranks: int, oversubscribe: bool = False, cores: int | None = None) -> None:
    """DistributedError for more ranks than cores, unless `oversubscribe`: each rank is a
    whole process with its model and data, and 1000 of them on 2 cores bring a machine to a
    halt long before any of them trains."""
    cores = cores or available_cores()
    if ranks < 1:
        raise DistributedError(f"-n must be at least 1, got {ranks}")
    if ranks > cores and not oversubscribe:
        raise DistributedError(
            f"-n {ranks}: more ranks than this machine's {cores} cores; use at most -n {cores}, "
            f"or pass --oversubscribe to start them anyway (each rank then runs slower than one "
            f"process would)"
        )


def check_command(ranks: int, args: list[str]) -> None:
    """Read `tinyformer ARGS` as the ranks will, before any starts: a bad flag exits 2 here,
    said once (argparse's SystemExit, or a ValueError from the command's settings); a
    training batch that does not divide over `ranks` is a DistributedError."""
    from tinyformer.cli import build_parser

    parsed = build_parser().parse_args(args)
    if parsed.command != "train":
        return
    cfg = _train_config(parsed)
    batch = getattr(cfg, "batch_size", None)
    if isinstance(batch, int) and batch % ranks and not getattr(cfg, "resume", False):
        below, above = batch // ranks * ranks, (batch // ranks + 1) * ranks
        raise DistributedError(
            f"--batch-size {batch} does not divide over -n {ranks} ranks (each trains on an "
            f"equal share of every batch): choose a multiple of {ranks}, e.g. "
            f"{above if below == 0 else below} or {above}"
        )


def _train_config(parsed: argparse.Namespace) -> Any:
    """The settings `tinyformer train NAME` builds from `parsed` (checked as it checks them)."""
    from tinyformer.train.args import dataclass_from_args
    from tinyformer.train.cli import TRAINERS
    from tinyformer.train.gpt import TrainGPTConfig
    from tinyformer.train.vision import TrainVisionConfig

    if parsed.model == "gpt":
        return dataclass_from_args(TrainGPTConfig, parsed)
    if parsed.model in TRAINERS:
        return dataclass_from_args(TRAINERS[parsed.model].config, parsed)
    return dataclass_from_args(TrainVisionConfig, parsed).resolved()


def launch_command(
    ranks: int, args: list[str], status_dir: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start `ranks` copies of `tinyformer args`; with
    `status_dir`, each rank through `_rank.py`, which records there how it ended."""
    if ranks < 1:
        raise DistributedError(f"-n must be at least 1, got {ranks}")
    if not args:
        raise DistributedError("give the command to run after --, e.g. -- train gpt")
    # Numba's threads only: a BLAS thread variable here would read as the user's choice, and
    # the runtime would leave BLAS's own pool running beside Numba's (tinyformer.runtime).
    env = {**os.environ, "NUMBA_NUM_THREADS": str(threads_per_rank(ranks))}
    wrapper = [str(RANK_SCRIPT), status_dir] if status_dir is not None else []
    cmd = [find_mpiexec(), "-n", str(ranks), sys.executable, *wrapper, "-m", "tinyformer.cli"]
    return [*cmd, *args], env


def resume_command(ranks: int, args: list[str], oversubscribe: bool = False) -> str:
    """The `tinyformer launch` line that continues the run `args` started."""
    rest = [a for a in args if a not in ("--overwrite", "--resume", "--no-resume")]
    flags = ["-n", str(ranks), *(["--oversubscribe"] if oversubscribe else [])]
    return shlex.join(["tinyformer", "launch", *flags, "--", *rest, "--resume"])


def add_launch_command(sub: Any) -> None:
    """`tinyformer launch` on the command line's subcommands."""
    launch = sub.add_parser(
        "launch",
        help="run a command on N processes (data parallel, over MPI)",
        description="Starts N ranks of `tinyformer ARGS...` with the MPI launcher of the mpi "
        'extra (pip install -e ".[mpi]"), e.g. `tinyformer launch -n 2 -- train gpt`. The '
        "same as `mpiexec -n N tinyformer ARGS...`, with each rank's threads set to its share "
        "of the cores, the command's flags checked once before any rank starts, Ctrl-C "
        "passed on to the ranks (they save), and a rank that dies named.",
    )
    launch.add_argument(
        "-n", "--nproc", type=ranged(int, COUNT), default=2,
        help="ranks, at most the machine's cores (default: 2)",
    )  # fmt: skip
    launch.add_argument(
        "--oversubscribe", action="store_true",
        help="allow more ranks than cores (each runs slower than one process would)",
    )  # fmt: skip
    launch.add_argument("args", nargs=argparse.REMAINDER, help="-- then the command to run")


def run_launch_command(ranks: int, rest: list[str], oversubscribe: bool = False) -> int:
    """Run `tinyformer REST` on `ranks` ranks; its exit status: 2 when it cannot start, 128 +
    the signal when one stopped it, else the ranks' (mpiexec's)."""
    from tinyformer.backend import DeviceUnavailable

    args = rest[1:] if rest[:1] == ["--"] else rest
    try:
        check_ranks(ranks, oversubscribe)
        if not args:
            raise DistributedError("give the command to run after --, e.g. -- train gpt")
        check_command(ranks, args)
        find_mpiexec()
    except (DistributedError, DeviceUnavailable, ValueError) as err:
        print(f"tinyformer launch: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tinyformer-launch-") as status_dir:
        cmd, env = launch_command(ranks, args, status_dir)
        code, signals = _supervise(cmd, env)
        if signals:
            return _stopped(signals[0], ranks, args, oversubscribe)
        if code != 0:
            _report_dead_rank(_rank_records(Path(status_dir)), ranks, args, oversubscribe)
        return code


def _supervise(cmd: list[str], env: dict[str, str]) -> tuple[int, list[int]]:
    """Run mpiexec in a session of its own, so that a terminal's Ctrl-C reaches it once,
    through this process (twice would make it abort the ranks before they save); returns
    its exit status and the signals passed on."""
    signals: list[int] = []
    process = subprocess.Popen(cmd, env=env, start_new_session=True)

    def forward(signum: int, frame: Any) -> None:
        signals.append(signum)
        if process.poll() is None:
            process.send_signal(signal.SIGINT if signum == signal.SIGHUP else signum)

    previous = {}
    for signum in FORWARDED:
        try:
            previous[signum] = signal.signal(signum, forward)
        except ValueError:  # not the main thread: signals behave as usual
            pass
    try:
        code = process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code, signals


def _stopped(signum: int, ranks: int, args: list[str], oversubscribe: bool) -> int:
    name = signal.Signals(signum).name
    print(f"tinyformer launch: {name} passed on to the {ranks} ranks; they saved where they "
          f"could.", file=sys.stderr)  # fmt: skip
    if args[:1] == ["train"]:
        print("Continue with:\n  " + resume_command(ranks, args, oversubscribe))
    return 128 + signum


def _rank_records(status_dir: Path) -> list[dict[str, Any]]:
    """The ranks' records, in the order they ended (first first)."""
    records = []
    for path in sorted(status_dir.glob("rank-*.json"), key=lambda p: p.stat().st_mtime_ns):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return records


def _how(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _report_dead_rank(
    records: list[dict[str, Any]], ranks: int, args: list[str], oversubscribe: bool
) -> None:
    """Name the rank that ended the job, unless every rank stopped alike (a bad setting they
    all refused: rank 0 said why)."""
    failed = [r for r in records if r.get("returncode") != 0]
    alike = len(failed) == ranks and len({r.get("returncode") for r in failed}) == 1
    if not failed or (alike and failed[0]["returncode"] > 0):
        return
    first = failed[0]
    print(f"tinyformer launch: rank {first['rank']} of {ranks} (pid {first['pid']}) "
          f"{_how(first['returncode'])}; mpiexec then ended the other ranks.",
          file=sys.stderr)  # fmt: skip
    if args[:1] != ["train"]:
        return
    checkpoint = _last_checkpoint(args)
    where = f"the last checkpoint is {checkpoint}" if checkpoint else "no checkpoint was saved"
    print(f"tinyformer launch: {where}.", file=sys.stderr)
    if checkpoint:
        print("Continue with:\n  " + resume_command(ranks, args, oversubscribe))


def _last_checkpoint(args: list[str]) -> Path | None:
    """The newest ckpt.npz in the run's --out-dir (or one of its step folders), if any."""
    from tinyformer.cli import build_parser

    try:
        out = Path(_train_config(build_parser().parse_args(args)).out_dir)
    except (SystemExit, ValueError, TypeError):
        return None
    found = [p for p in (out / "ckpt.npz", *out.glob("*/ckpt.npz")) if p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None
