"""`--device` on every command: a run on the fake device is a run like any other, and `cuda`
without a usable GPU is one clear line and exit status 2, before any work."""

from __future__ import annotations

import json

import pytest

from tests.test_run_folders import TINY
from tinyformer import backend, cli

NO_GPU = pytest.mark.skipif(backend.cuda_available(), reason="a GPU is usable here")

COMMANDS = [
    ["train", "gpt"], ["train", "bert"], ["train", "seq2seq"], ["train", "vit"],
    ["train", "cnn"], ["train", "unet"], ["sample", "--ckpt", "missing.npz"],
    ["eval", "--ckpt", "missing.npz"], ["embed", "--model", "missing", "hello"], ["demo"],
    ["explain", "softmax"],
]  # fmt: skip


@NO_GPU
@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:2]) for a in COMMANDS])
def test_cuda_without_a_gpu_is_one_clear_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main([*argv, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "'cuda' is not available" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # refused before writing anything


def test_a_gpt_run_on_the_fake_device_trains_saves_and_samples(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["--data", corpus, *TINY, "--iters", "12", "--eval-interval", "5"]
    assert cli.main(["train", "gpt", *flags, "--device", "fake", "--out-dir", str(out)]) == 0
    log = json.loads((out / "log.json").read_text())
    assert len(log["loss"]) == len(log["ms"]) == 12 and log["loss"][-1] < log["loss"][0]
    assert cli.main(["sample", "--ckpt", str(out / "ckpt.npz"), "--device", "fake"]) == 0
    assert capsys.readouterr().out.strip()


def test_the_demo_runs_its_layer_on_a_device(capsys):
    assert cli.main(["demo", "--device", "fake"]) == 0
    assert "on fake:0: the same gradients" in capsys.readouterr().out
