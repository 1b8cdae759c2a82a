"""The run folder of `tinyformer train rlhf`. `--resume`: a run stopped in any step and resumed
ends with the files and table of an uninterrupted run; finished steps are kept, a replaced
run's steps are not continued, an interrupted pretraining of --init is continued rather than
taken as pretrained, and a folder with no run, another command's run or --overwrite are
refused as elsewhere. Bad input: a one-line error naming the flag (exit status 2), a run that
diverges stops with exit status 1, never a traceback nor a silently wrong result."""

from __future__ import annotations

import dataclasses
import errno
import json

import numpy as np
import pytest

from tinyformer import cli, fileio
from tinyformer.checkpoint import load_checkpoint, save_checkpoint
from tinyformer.data import CharTokenizer
from tinyformer.models.gpt import GPT, GPTConfig
from tinyformer.train import memory
from tinyformer.train.gpt import TrainGPTConfig, train_gpt
from tinyformer.train.rlhf import TrainRLHFConfig, train_rlhf

TINY = dict(
    prompt_len=4, completion_len=12, demos=32, sft_iters=4, prompts=8, rm_iters=4, ppo_iters=3,
    rollout=8, minibatch=4, ppo_epochs=1, dpo_iters=4, batch_size=4, eval_prompts=8,
    progress=False,
)  # fmt: skip
STEPS = ("sft", "reward", "ppo", "dpo")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A corpus a 40-step GPT learns to spell (two of the labeler's words and one other), and
    that GPT: (corpus, run folder)."""
    folder = tmp_path_factory.mktemp("rlhf")
    corpus = folder / "corpus.txt"
    corpus.write_text(" ".join(np.random.default_rng(0).choice(["list", "code", "xx"], 3000)))
    train_gpt(TrainGPTConfig(data=str(corpus), n_layer=1, n_head=2, n_embd=16, block_size=16,
                             iters=40, lr=1e-2, warmup=5, eval_interval=40, eval_iters=1,
                             batch_size=16, out_dir=str(folder / "base"), sample_tokens=0,
                             progress=False))  # fmt: skip
    return str(corpus), str(folder / "base")


def _config(base, out, **changes) -> TrainRLHFConfig:
    settings = {"data": base[0], "init": base[1], "out_dir": str(out), **TINY, **changes}
    return TrainRLHFConfig(**settings)


def _stop_at(step: str, iteration: int, calls: list | None = None):
    """An on_step that stops the run after `iteration` of `step`, recording every call."""

    def on_step(s: str, it: int) -> bool:
        if calls is not None:
            calls.append((s, it))
        return (s, it) == (step, iteration)

    return on_step


def _assert_same_runs(a, b) -> None:
    """Every step's checkpoint equal, array for array (weights, optimizer moments), and the
    same losses, evaluations and PPO numbers."""
    for step in STEPS:
        arrays_a, meta_a = load_checkpoint(a / step / "ckpt.npz")
        arrays_b, meta_b = load_checkpoint(b / step / "ckpt.npz")
        assert arrays_a.keys() == arrays_b.keys(), step
        for name in arrays_a:
            np.testing.assert_array_equal(arrays_a[name], arrays_b[name], err_msg=f"{step} {name}")
        assert meta_a["rng"] == meta_b["rng"], step
        for key in ("loss", "evals", "reward", "kl", "score"):
            assert meta_a["log"].get(key) == meta_b["log"].get(key), f"{step} {key}"


def test_a_run_stopped_in_every_step_resumes_to_the_uninterrupted_result(base, tmp_path, capsys):
    straight = train_rlhf(_config(base, tmp_path / "a"))
    out = tmp_path / "b"
    assert train_rlhf(_config(base, out), _stop_at("sft", 2)) == {"stopped": "sft"}
    assert "tinyformer train rlhf --resume --out-dir" in capsys.readouterr().out
    # each session continues where the last stopped: finished steps are not trained again
    sessions = {
        ("reward", 2): [("sft", 3), ("sft", 4), ("reward", 1), ("reward", 2)],
        ("ppo", 1): [("reward", 3), ("reward", 4), ("ppo", 1)],
        ("ppo", 2): [("ppo", 2)],
        ("dpo", 3): [("ppo", 3), ("dpo", 1), ("dpo", 2), ("dpo", 3)],
    }
    for (step, iteration), steps in sessions.items():
        calls: list = []
        stopped = train_rlhf(_config(base, out, resume=True), _stop_at(step, iteration, calls))
        assert stopped == {"stopped": step} and calls == steps
        _, meta = load_checkpoint(out / step / "ckpt.npz")
        assert meta["iteration"] == iteration
    calls = []
    resumed = train_rlhf(_config(base, out, resume=True), _stop_at("", 0, calls))
    assert calls == [("dpo", 4)]
    _assert_same_runs(tmp_path / "a", out)
    for policy, row in straight["table"].items():
        for key in ("score", "kl", "samples"):
            assert resumed["table"][policy][key] == row[key], f"{policy} {key}"
    assert resumed["ppo_log"]["reward"] == straight["ppo_log"]["reward"]
    # the PPO policy is still a GPT checkpoint that `sample` reads
    assert cli.main(["sample", "--ckpt", str(out / "ppo"), "--tokens", "3"]) == 0
    # a finished run resumed: nothing is trained again, and changed flags are named
    capsys.readouterr()
    calls = []
    again = train_rlhf(_config(base, out, resume=True, sft_iters=9, seed=3), _stop_at("", 0, calls))
    assert calls == []
    assert "ignored: --sft-iters 9 (saved: 4), --seed 3 (saved: 0)" in capsys.readouterr().out
    assert again["table"]["PPO"]["samples"] == straight["table"]["PPO"]["samples"]
    _assert_same_runs(tmp_path / "a", out)


def test_a_replaced_runs_steps_are_not_continued(base, tmp_path, capsys):
    out = tmp_path / "run"
    train_rlhf(_config(base, out, method="dpo"))
    # --overwrite starts a new run (another seed) that stops in SFT; --resume continues it
    assert train_rlhf(_config(base, out, method="dpo", seed=1, overwrite=True),
                      _stop_at("sft", 2)) == {"stopped": "sft"}  # fmt: skip
    capsys.readouterr()
    train_rlhf(_config(base, out, method="dpo", resume=True))
    assert "dpo/ckpt.npz is not this run's (a replaced run's?): dpo starts over" in (
        capsys.readouterr().out
    )
    runs = {json.dumps(load_checkpoint(out / step / "ckpt.npz")[1]["rlhf"]["run"])
            for step in ("sft", "dpo")}  # fmt: skip
    assert len(runs) == 1
    _, meta = load_checkpoint(out / "dpo" / "ckpt.npz")
    assert meta["rlhf"]["config"]["seed"] == 1 and meta["iteration"] == TINY["dpo_iters"]


def test_an_interrupted_pretraining_of_init_is_continued_not_taken(base, tmp_path, capsys):
    init, out = tmp_path / "init", tmp_path / "run"
    cfg = dict(init=str(init), base_iters=4)
    assert train_rlhf(_config(base, out, **cfg), _stop_at("base", 2)) == {"stopped": "base"}
    # it was taken as the pretrained model, silently, half trained
    argv = ["train", "rlhf", "--data", base[0], "--init", str(init), "--out-dir", str(out),
            "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 2
    assert (
        f"--init {init} holds a GPT run stopped at iteration 2 of 4: continue it with --resume"
        in capsys.readouterr().err
    )
    stopped = train_rlhf(_config(base, out, resume=True, **cfg), _stop_at("sft", 1))
    assert stopped == {"stopped": "sft"}
    assert load_checkpoint(init / "ckpt.npz")[1]["iteration"] == 4


def test_resume_refuses_a_folder_without_a_run_another_commands_run_and_overwrite(
    base, tmp_path, capsys
):
    flags = ["--data", base[0], "--init", base[1], "--no-progress"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["train", "rlhf", *flags, "--resume", "--out-dir", str(empty)]) == 2
    assert f"no checkpoint at {empty / 'sft' / 'ckpt.npz'}" in capsys.readouterr().err
    # the GPT run of --init is a run of another command
    assert cli.main(["train", "rlhf", *flags, "--resume", "--out-dir", base[1]]) == 2
    assert "ckpt.npz holds a run of another command: resume it with the command that wrote it" in (
        capsys.readouterr().err
    )
    argv = ["train", "rlhf", *flags, "--resume", "--overwrite", "--out-dir", str(empty)]
    assert cli.main(argv) == 2
    assert "--resume and --overwrite conflict" in capsys.readouterr().err


def _flags(base, out) -> list[str]:
    """The command line of TINY's run on the `base` fixture, into `out`."""
    names = {k: v for k, v in TINY.items() if k != "progress"}
    flags = [str(x) for k, v in names.items() for x in (f"--{k.replace('_', '-')}", v)]
    return ["train", "rlhf", "--data", base[0], "--init", base[1], "--out-dir", str(out),
            "--no-progress", *flags]  # fmt: skip


@pytest.mark.parametrize(
    "changes, message",
    [
        (["--batch-size", "4096"], "--batch-size 4096: one training step would keep at least"),
        (["--minibatch", "4096"], "--minibatch 4096: one training step would keep at least"),
        (["--rollout", "4096"], "--rollout 4096: one training step would keep at least"),
        (["--demos", "100000"], "--demos 100000: the demonstrations would hold at least"),
        (["--samples-per-prompt", "1000"],
         "--prompts 8 --samples-per-prompt 1000: up to prompts * K (K - 1) / 2 preference pairs "
         "would hold at least"),
        (["--eval-prompts", "100000"], "--eval-prompts 100000: the held-out prompts would hold"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)  # fmt: skip
def test_sizes_that_cannot_fit_are_refused_before_any_work(
    changes, message, base, tmp_path, capsys, monkeypatch
):
    # --batch-size 100000000 was killed by the OOM killer; counts of prompts or samples spent
    # minutes sampling before failing. Here the machine has 4 MiB.
    monkeypatch.setattr(memory, "physical_memory", lambda: 4 * 2**20)
    assert cli.main([*_flags(base, tmp_path / "run"), *changes]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    # and before an --init that holds no GPT is pretrained
    argv = _flags(base, tmp_path / "run")
    argv[argv.index("--init") + 1] = str(tmp_path / "base")
    assert cli.main([*argv, *changes]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "base").exists()


def test_bad_init_checkpoints_and_out_dirs_are_refused_by_name(base, tmp_path, capsys):
    argv = _flags(base, tmp_path / "run")
    at = argv.index("--init") + 1

    def refused(init: str, message: str, args: list[str] = argv) -> None:
        assert cli.main([*args[:at], init, *args[at + 1 :]]) == 2
        assert message in capsys.readouterr().err

    # a missing file was taken for a folder to pretrain a GPT in
    refused(str(tmp_path / "gpt.npz"), f"--init {tmp_path / 'gpt.npz'}: no such checkpoint file")
    other = tmp_path / "other"
    (other / "sft").mkdir(parents=True)
    (other / "sft" / "ckpt.npz").write_bytes(b"")
    refused(str(other), f"--init {other} holds no GPT checkpoint (ckpt.npz) but other runs")
    config = GPTConfig(block_size=16, vocab_size=3, n_layer=1, n_head=1, n_embd=8)
    weights = {f"model/{k}": v.data for k, v in GPT(config).state_dict().items()}
    weights["model/ln_f.weight"][0] = np.nan
    meta = {"model_config": dataclasses.asdict(config), "tokenizer": CharTokenizer("xl").to_dict()}
    save_checkpoint(tmp_path / "nan" / "ckpt.npz", weights, meta)
    refused(str(tmp_path / "nan"), "the weights ln_f.weight hold NaN or infinite values")
    (tmp_path / "a_file").write_text("")
    out = argv.index("--out-dir") + 1
    argv[out] = str(tmp_path / "a_file")
    refused(base[1], f"--out-dir {tmp_path / 'a_file'}: cannot write there (Not a directory")


def test_a_read_only_out_dir_is_refused(base, tmp_path, capsys, monkeypatch):
    def read_only(*args, **kwargs):  # root writes anywhere: a read-only folder, mocked
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run"))

    monkeypatch.setattr(fileio.tempfile, "TemporaryFile", read_only)
    assert cli.main(_flags(base, tmp_path / "run")) == 2
    assert "cannot write there (Permission denied" in capsys.readouterr().err


def test_nonsense_settings_are_refused_by_name_from_python_too():
    # --method was checked by argparse only: from Python, any other word trained no policy
    for changes, message in (
        ({"method": "ppo2"}, "--method must be one of ppo, dpo, both, got 'ppo2'"),
        ({"lam": 5.0}, r"--lam must be in \[0, 1\], got 5.0"),  # GAE's lambda: a weight
        ({"clip_eps": 3.0}, r"--clip-eps must be in \(0, 1\), got 3.0"),
        ({"sft_iters": 0}, "--sft-iters must be at least 1, got 0"),
        ({"ppo_iters": -3}, "--ppo-iters must be at least 1, got -3"),
        ({"seed": 2**64}, r"--seed must be below 2\*\*64 - 8, got"),  # was manual_seed's
    ):
        with pytest.raises(ValueError, match=message):
            TrainRLHFConfig(**changes)


def test_a_diverging_ppo_stops_before_the_weights_turn_nan(base, tmp_path, capsys):
    # NaN weights were saved and measured, and the table printed NaN
    assert cli.main([*_flags(base, tmp_path / "run"), "--ppo-lr", "1e30"]) == 1
    err = capsys.readouterr().err
    assert "PPO iteration 1: the loss is nan; the run stopped before the optimizer step" in err
    assert not (tmp_path / "run" / "ppo" / "ckpt.npz").exists()


def test_resume_refuses_a_damaged_ppo_checkpoint(base, tmp_path, capsys):
    out = tmp_path / "run"
    assert train_rlhf(_config(base, out, method="ppo"), _stop_at("ppo", 1)) == {"stopped": "ppo"}
    arrays, meta = load_checkpoint(out / "ppo" / "ckpt.npz")
    arrays["value/weight"][0, 0] = np.inf
    save_checkpoint(out / "ppo" / "ckpt.npz", arrays, meta)
    assert cli.main([*_flags(base, out), "--method", "ppo", "--resume"]) == 2
    assert "ppo/ckpt.npz: the weights value/weight hold NaN or infinite" in (
        capsys.readouterr().err
    )
