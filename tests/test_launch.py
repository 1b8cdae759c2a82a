"""`tinyformer launch`: what it refuses before any rank starts (more ranks than cores, a batch
that does not divide over the ranks, any bad flag of the command, each said once), how it
stops on Ctrl-C (passed on, the ranks save, the resume line, exit 130, no traceback) and what
it says when a rank dies (which rank, how, the last checkpoint, the resume command)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tinyformer import cli
from tinyformer.distributed.launch import check_ranks, resume_command
from tinyformer.distributed.process_group import DistributedError

TINY_RUN = [
    "train", "gpt", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
    "--batch-size", "4", "--eval-interval", "2", "--eval-iters", "1", "--sample-tokens", "0",
    "--no-progress", "--iters", "100000",
]  # fmt: skip


def test_more_ranks_than_cores_are_refused_unless_oversubscribed(capsys):
    with pytest.raises(DistributedError, match=r"-n 3: more ranks than this machine's 2 cores"):
        check_ranks(3, cores=2)
    check_ranks(2, cores=2)
    check_ranks(3, oversubscribe=True, cores=2)
    # 1000 ranks on a 2-core machine started, and the load went to 600
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cli.main(["launch", "-n", str(cores + 1), "--", "params", "gpt"]) == 2
    err = capsys.readouterr().err
    assert f"-n {cores + 1}: more ranks than this machine's {cores} cores" in err
    assert f"use at most -n {cores}, or pass --oversubscribe" in err


def test_a_batch_that_does_not_divide_is_refused_once_before_any_rank(capsys, tmp_path):
    # it was refused by every rank, after rank 0 had evaluated and written a checkpoint
    out = tmp_path / "run"
    argv = ["launch", "-n", "5", "--oversubscribe", "--", *TINY_RUN, "--batch-size", "12"]
    assert cli.main([*argv, "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("--batch-size 12 does not divide over -n 5 ranks") == 1
    assert "choose a multiple of 5, e.g. 10 or 15" in err
    assert not out.exists()
    # a batch size left to its default (the ViT's 64) is checked too
    argv = ["launch", "-n", "3", "--oversubscribe", "--", "train", "vit", "--out-dir", str(out)]
    assert cli.main(argv) == 2
    assert "--batch-size 64 does not divide over -n 3 ranks" in capsys.readouterr().err


def test_a_bad_flag_of_the_command_is_said_once_by_the_launcher(capsys, tmp_path):
    argv = ["launch", "-n", "2", "--oversubscribe", "--", *TINY_RUN, "--warmup", "-5"]
    assert cli.main([*argv, "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.count("--warmup must be at least 0, got -5") == 1
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()
    with pytest.raises(SystemExit) as exit_:  # what argparse refuses, it says once too
        cli.main(["launch", "-n", "2", "--oversubscribe", "--", *TINY_RUN, "--warmup", "x"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.count("argument --warmup: invalid int value: 'x'") == 1


def test_the_resume_command_continues_the_run_on_as_many_ranks():
    line = resume_command(3, ["train", "gpt", "--overwrite", "--out-dir", "a b"], True)
    assert line == "tinyformer launch -n 3 --oversubscribe -- train gpt --out-dir 'a b' --resume"
    assert resume_command(2, ["train", "gpt", "--resume"]).count("--resume") == 1


def _mpi() -> None:
    try:
        from mpi4py import MPI  # noqa: F401
    except (ImportError, RuntimeError) as err:
        pytest.skip(f"no working mpi4py ({type(err).__name__}): pip install -e '.[mpi]'")


def _launch(out: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "tinyformer.cli", "launch", "-n", "2", "--oversubscribe", "--"]
    return subprocess.Popen(
        [*cmd, *TINY_RUN, "--out-dir", str(out)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "NUMBA_NUM_THREADS": "1"},
    )  # fmt: skip


def _after_first_eval(process: subprocess.Popen, then) -> str:
    """Read until rank 0 has evaluated twice (a checkpoint is saved), call `then`, return
    everything printed."""
    seen = []
    try:
        for line in process.stdout:
            seen.append(line)
            if line.startswith("iter     2:"):
                then()
                break
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return "".join(seen) + rest


def test_ctrl_c_is_passed_on_the_ranks_save_and_the_resume_line_is_printed(tmp_path):
    # it was a KeyboardInterrupt traceback from the launcher, and the resume line was lost
    _mpi()
    launch = _launch(tmp_path / "run")
    text = _after_first_eval(launch, lambda: launch.send_signal(signal.SIGINT))
    assert launch.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert "Continue with:\n  tinyformer launch -n 2 --oversubscribe -- train gpt" in text
    assert text.rstrip().endswith(f"--out-dir {tmp_path / 'run'} --resume")
    assert (tmp_path / "run" / "ckpt.npz").is_file()


def _rank_pid(rank: int) -> int:
    """The pid of the process that runs `tinyformer.cli` as rank `rank` (from /proc)."""
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tinyformer.cli" in command and not any(c.endswith(b"_rank.py") for c in command):
            if f"PMI_RANK={rank}".encode() in env and b"launch" not in command:
                return int(entry.name)
    raise AssertionError(f"no process of rank {rank}")


def test_a_dead_rank_is_named_with_its_signal_checkpoint_and_resume_command(tmp_path):
    # only MPICH's banner said that a process had died: not which rank, nor how to go on
    _mpi()
    if not Path("/proc/self/environ").exists():
        pytest.skip("finds the rank's process through /proc")
    launch = _launch(tmp_path / "run")
    text = _after_first_eval(launch, lambda: os.kill(_rank_pid(1), signal.SIGKILL))
    assert launch.returncode != 0, text
    assert "rank 1 of 2 (pid " in text and ") was killed by SIGKILL" in text
    assert f"the last checkpoint is {tmp_path / 'run' / 'ckpt.npz'}" in text
    assert "Continue with:\n  tinyformer launch -n 2 --oversubscribe -- train gpt" in text
