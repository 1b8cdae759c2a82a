"""Training runs never lose or clobber work: a copied run resumes where it is, a trained run is
not replaced unless asked, one run at a time holds a folder, signals and closed pipes save
before stopping, killed writers' leftovers are cleared, and a diverging run stops at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tinyformer as tf
from tests.test_train import _config
from tinyformer import cli, nn
from tinyformer.checkpoint import load_checkpoint
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.optim import SGD, AdamW, WarmupCosineLR
from tinyformer.train import TrainGPTConfig, train_gpt
from tinyformer.train.loop import NonFiniteLoss, Run, train_loop
from tinyformer.train.rundir import RunFolderBusy, claim_out_dir

TINY = [
    "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16",
    "--batch-size", "4", "--eval-iters", "1", "--no-progress", "--sample-tokens", "0",
]  # fmt: skip


def _iteration(folder: Path) -> int:
    return load_checkpoint(folder / "ckpt.npz")[1]["iteration"]


def test_a_copied_run_resumes_in_its_new_folder_and_leaves_the_original_alone(corpus, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    train_gpt(_config(corpus, a, iters=6))
    before = (a / "ckpt.npz").read_bytes()
    shutil.copytree(a, b)
    train_gpt(_config(corpus, b, resume=True, iters=9))
    assert _iteration(b) == 9 and (a / "ckpt.npz").read_bytes() == before
    shutil.rmtree(a)  # moved rather than copied: the first folder is not made again
    train_gpt(_config(corpus, b, resume=True, iters=11))
    assert _iteration(b) == 11 and not a.exists()
    assert json.loads((b / "log.json").read_text())["config"]["out_dir"] == str(b)


def test_a_new_run_does_not_replace_a_trained_one_unless_asked(corpus, tmp_path, capsys):
    run = tmp_path / "run"
    train_gpt(_config(corpus, run, iters=4))
    before = (run / "ckpt.npz").read_bytes()
    with pytest.raises(RunFolderBusy, match=r"already holds a run .*--resume.*--overwrite"):
        train_gpt(_config(corpus, run, iters=4, seed=1))
    assert (run / "ckpt.npz").read_bytes() == before
    flags = ["train", "gpt", "--data", corpus, *TINY, "--iters", "2", "--out-dir", str(run)]
    assert cli.main(flags) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert cli.main([*flags, "--overwrite"]) == 0 and _iteration(run) == 2


def test_one_run_at_a_time_in_a_folder(corpus, tmp_path, capsys):
    run = tmp_path / "run"
    with claim_out_dir(run):
        owner = json.loads((run / ".lock").read_text())
        assert owner["pid"] == os.getpid() and owner["host"]
        with pytest.raises(RunFolderBusy, match=rf"in use by pid {os.getpid()} on "):
            train_gpt(_config(corpus, run, iters=2))
        flags = ["train", "gpt", "--data", corpus, *TINY, "--iters", "2", "--out-dir", str(run)]
        assert cli.main(flags) == 2
        assert f"in use by pid {os.getpid()}" in capsys.readouterr().err
    assert not run.exists()  # the refused runs wrote nothing, and the claim made the folder
    # A killed run's lock file: nobody holds the lock, so the next run takes the folder over.
    run.mkdir()
    (run / ".lock").write_text(json.dumps({"pid": 999999, "host": "h", "command": "c",
                                           "started": 0}))  # fmt: skip
    train_gpt(_config(corpus, run, iters=2))
    assert "names pid 999999 on h" in capsys.readouterr().out and _iteration(run) == 2
    assert not (run / ".lock").exists()


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
    with pytest.raises(RuntimeError), claim_out_dir(tmp_path / "new" / "run"):
        raise RuntimeError("the data could not be loaded")
    assert list(tmp_path.iterdir()) == []


def test_killed_writers_temporary_files_are_cleared_by_the_next_run(corpus, tmp_path):
    run = tmp_path / "run"
    train_gpt(_config(corpus, run, iters=2))
    dead = [run / ".ckpt.npz.999999.k2j3.tmp", run / ".loss.png.x7q1.tmp"]  # and an old-style
    alive = run / f".log.json.{os.getpid()}.a1b2.tmp"  # a writer still at work: kept
    for path in (*dead, alive):
        path.write_bytes(b"half a file")
    train_gpt(_config(corpus, run, resume=True, iters=3))
    assert not any(p.exists() for p in dead) and alive.exists()


def test_resuming_for_more_steps_keeps_the_schedule(corpus, tmp_path, capsys):
    run = tmp_path / "run"
    first = train_gpt(_config(corpus, run, iters=8, warmup=2, lr=1e-2, min_lr_ratio=0.1))
    capsys.readouterr()
    log = train_gpt(_config(corpus, run, resume=True, iters=12))
    assert (
        "schedule ends at iteration 8; iterations 8-12 go on at its final"
        in capsys.readouterr().out
    )
    assert log["lr"][:8] == first["lr"]
    assert log["lr"][8:] == [pytest.approx(1e-3)] * 4  # never back up the cosine
    assert all(a >= b for a, b in zip(log["lr"][2:], log["lr"][3:]))


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(lr=float("nan")), "--lr must be a finite number, got nan"),
        (dict(weight_decay=float("nan")), "--weight-decay must be a finite number, got nan"),
        (dict(grad_clip=float("nan")), "--grad-clip must be a finite number, got nan"),
        (dict(lr=float("inf")), "--lr must be a finite number, got inf"),
        (dict(beta1=float("nan")), "--beta1 must be a finite number"),
    ],
)
def test_non_finite_hyperparameters_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        TrainGPTConfig(**changes)


def test_non_finite_optimizer_and_sampling_settings_are_refused(tmp_path, capsys):
    params = [nn.Linear(2, 2).weight]
    for make in (
        lambda: AdamW(params, lr=float("nan")),
        lambda: AdamW(params, weight_decay=float("nan")),
        lambda: SGD(params, lr=float("inf")),
        lambda: SGD(params, lr=0.1, momentum=float("nan")),
    ):
        with pytest.raises(ValueError, match="must be finite"):
            make()
    model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4))
    with pytest.raises(ValueError, match="temperature must be finite and > 0, got nan"):
        model.generate(np.zeros((1, 1), np.int64), 2, temperature=float("nan"))
    with pytest.raises(SystemExit) as exit_:  # refused as the flags are read
        cli.main(["sample", "--ckpt", str(tmp_path), "--temperature", "nan"])
    assert exit_.value.code == 2
    assert "argument --temperature: must be above 0, got nan" in capsys.readouterr().err


def test_a_run_whose_loss_stops_being_finite_stops_and_keeps_its_checkpoint(tmp_path):
    model = nn.Linear(3, 1)
    optimizer = AdamW(model.parameters(), lr=1e-2)
    x = np.ones((4, 3), np.float32)

    def get_batch(rng):  # the 8th batch holds a NaN, as do its loss and gradients
        return (x * np.nan if len(run.log["loss"]) == 7 else x), np.zeros((4, 1), np.float32)

    run = Run(
        model, optimizer, WarmupCosineLR(optimizer, 0, 20), np.random.default_rng(0),
        get_batch=get_batch, evaluate=lambda it: {"val": 0.0}, meta=dict,
        config=TrainGPTConfig(iters=20, eval_interval=5, out_dir=str(tmp_path), progress=False),
        command="gpt", title="t",
        loss=lambda inputs, targets: ((model(tf.Tensor(inputs)) - targets) ** 2).mean(),
    )  # fmt: skip
    weights = model.weight.data.copy()
    with pytest.raises(NonFiniteLoss, match=r"iteration 8: the loss is nan.*from iteration 5"):
        train_loop(run)
    assert len(run.log["loss"]) == 7 and np.isfinite(model.weight.data).all()
    assert not np.array_equal(weights, model.weight.data)  # it trained, then stopped
    assert _iteration(tmp_path) == 5


def _start(corpus, out, *extra):
    argv = [sys.executable, "-m", "tinyformer.cli", "train", "gpt", "--data", corpus, *TINY,
            "--eval-interval", "3", "--out-dir", str(out), *extra]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_saves_then_stops_with_the_signals_exit_status(corpus, tmp_path, signum, code):
    out = tmp_path / "run"
    process = _start(corpus, out, "--iters", "100000")
    deadline = time.monotonic() + 120
    while not (out / "ckpt.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr
    assert "Traceback" not in stderr
    done = _iteration(out)
    assert f"stopped at iteration {done}" in stdout and done >= 1
    assert not (out / ".lock").exists()


def test_a_closed_stdout_does_not_stop_the_run(corpus, tmp_path):
    out = tmp_path / "run"
    process = _start(corpus, out, "--iters", "9")
    first = process.stdout.readline()  # `| head -1`
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 0, stderr
    assert first.startswith("iter     0:") and "Traceback" not in stderr
    assert _iteration(out) == 9
