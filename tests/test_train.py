"""Checkpoint files, the training loop, resume, and the train / sample / params commands."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from tinyformer import cli
from tinyformer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from tinyformer.train import TrainGPTConfig, load_model, loop, train_gpt


def _config(corpus, out, **changes):
    base = dict(
        data=corpus, n_layer=1, n_head=2, n_embd=16, block_size=16, dropout=0.1, iters=12,
        batch_size=4, warmup=3, eval_interval=5, eval_iters=2, out_dir=str(out),
        sample_tokens=0, progress=False,
    )  # fmt: skip
    return TrainGPTConfig(**{**base, **changes})


def test_checkpoint_round_trip_and_damage(tmp_path):
    path = tmp_path / "c.npz"
    arrays = {"model/w": np.arange(6.0).reshape(2, 3), "optim/0/m": np.ones(3, np.float32)}
    save_checkpoint(path, arrays, {"iteration": 7})
    loaded, meta = load_checkpoint(path)
    assert meta["iteration"] == 7 and set(loaded) == set(arrays)
    np.testing.assert_array_equal(loaded["model/w"], arrays["model/w"])

    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "noise.npz").write_bytes(np.random.default_rng(0).bytes(2000))
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF
    (tmp_path / "flip.npz").write_bytes(bytes(flipped))
    np.savez(tmp_path / "plain.npz", w=np.ones(2))
    np.savez(tmp_path / "pickled.npz", __meta__=np.array([{"a": 1}], dtype=object))
    (tmp_path / "empty.npz").write_bytes(b"")
    for name in ("cut", "noise", "flip", "plain", "pickled", "missing", "empty"):
        with pytest.raises(CheckpointError):
            load_checkpoint(tmp_path / f"{name}.npz")
    # Not zip archives: one array saved by np.save, and a file of text. The message says what a
    # checkpoint is, and never suggests loading a file with pickles allowed.
    np.save(tmp_path / "array.npy", np.ones(3))
    (tmp_path / "notes.txt").write_text("garbage")
    for name in ("array.npy", "notes.txt"):
        with pytest.raises(CheckpointError, match=r"checkpoints are \.npz \(zip\) archives") as err:
            load_checkpoint(tmp_path / name)
        assert "pickle" not in str(err.value)


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"
    save_checkpoint(path, {"w": np.zeros(2)}, {"iteration": 1})

    def crash(file, **arrays):
        file.write(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"w": np.ones(2)}, {"iteration": 2})
    monkeypatch.undo()
    assert load_checkpoint(path)[1]["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.npz"]  # no temporary file left behind


@pytest.mark.parametrize("every, drawn", [(30.0, [12]), (0.0, [0, 5, 10, 12])])
def test_the_loss_plot_is_drawn_at_the_end_and_at_most_every_so_often(
    corpus, tmp_path, monkeypatch, every, drawn
):
    # a short run draws loss.png once, when it ends; one slower than the interval at every
    # checkpoint (a plot costs ~0.5 s, more than a short run's whole step budget)
    iterations = []
    monkeypatch.setattr(loop, "PLOT_EVERY_S", every)
    monkeypatch.setattr(loop, "plot_losses", lambda log, *args: iterations.append(len(log["loss"])))
    train_gpt(_config(corpus, tmp_path / "run"))
    assert iterations == drawn


def test_training_writes_checkpoint_log_and_plot(corpus, tmp_path):
    log = train_gpt(_config(corpus, tmp_path / "run"))
    run = tmp_path / "run"
    assert {"ckpt.npz", "log.json", "loss.png"} <= {p.name for p in run.iterdir()}
    assert len(log["loss"]) == 12 and [e["iter"] for e in log["evals"]] == [0, 5, 10, 12]
    assert json.loads((run / "log.json").read_text())["peak_rss_mib"] > 0
    assert (run / "loss.png").read_bytes()[:4] == b"\x89PNG"
    model, tokenizer, meta = load_model(run)
    assert meta["iteration"] == 12 and tokenizer.decode(tokenizer.encode("fox")) == "fox"
    with zipfile.ZipFile(run / "ckpt.npz") as z:  # data only: every entry is a plain array
        assert all(name.endswith(".npy") for name in z.namelist())


def test_interrupt_and_resume_equals_an_uninterrupted_run(corpus, tmp_path):
    train_gpt(_config(corpus, tmp_path / "straight"))
    stopped = train_gpt(_config(corpus, tmp_path / "resumed"), on_step=lambda it: it == 7)
    assert len(stopped["loss"]) == 7
    train_gpt(_config(corpus, tmp_path / "resumed", resume=True, iters=None))  # saved: 12
    a, _, meta_a = load_model(tmp_path / "straight")
    b, _, meta_b = load_model(tmp_path / "resumed")
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(pa.data, pb.data, err_msg=name)
    assert meta_a["log"]["loss"] == meta_b["log"]["loss"]
    assert meta_a["log"]["evals"] == meta_b["log"]["evals"]


def test_resume_says_what_it_ignores_and_refuses_another_commands_run(corpus, tmp_path, capsys):
    from tinyformer.train.vision import TrainVisionConfig, train_vision

    run = tmp_path / "run"
    train_gpt(_config(corpus, run, iters=4))
    capsys.readouterr()
    log = train_gpt(_config(corpus, run, resume=True, iters=4, lr=0.5, batch_size=3))
    out = capsys.readouterr().out
    assert "has already reached iteration 4 (asked for 4): nothing to train there" in out
    assert "ignored: --batch-size 3 (saved: 4), --lr 0.5 (saved: 0.001)" in out
    assert len(log["loss"]) == 4  # nothing trained
    # A run saved before a flag existed resumes, the flag at its default
    arrays, meta = load_checkpoint(run / "ckpt.npz")
    del meta["train_config"]["eval_iters"]
    save_checkpoint(run / "ckpt.npz", arrays, meta)
    assert len(train_gpt(_config(corpus, run, resume=True, iters=6))["loss"]) == 6
    with pytest.raises(ValueError, match="holds a run of another command: resume it with"):
        train_vision(TrainVisionConfig(model="vit", resume=True, out_dir=str(run)))


def test_cli_train_sample_params(corpus, tmp_path, capsys):
    out = tmp_path / "cli"
    flags = [
        "--data", corpus, "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size",
        "16", "--iters", "4", "--eval-interval", "2", "--eval-iters", "1", "--batch-size", "2",
        "--out-dir", str(out), "--sample-tokens", "5", "--no-progress",
    ]  # fmt: skip
    assert cli.main(["train", "gpt", *flags]) == 0
    assert "--- sample ---" in capsys.readouterr().out
    assert cli.main(["sample", "--ckpt", str(out), "--prompt", "the", "--tokens", "10"]) == 0
    assert capsys.readouterr().out.startswith("the")
    assert cli.main(["params", "gpt", "--config", "gpt2"]) == 0
    assert "124,439,808" in capsys.readouterr().out
    (out / "ckpt.npz").write_bytes(b"garbage")
    assert cli.main(["sample", "--ckpt", str(out)]) == 2
    assert "is not a tinyformer checkpoint" in capsys.readouterr().err
    other = tmp_path / "vit.npz"  # another command's run (was a TypeError from GPTConfig)
    save_checkpoint(
        other, {"model/w": np.ones(1)}, {"model_kind": "vit", "model_config": {"image_size": 8}}
    )
    assert cli.main(["sample", "--ckpt", str(other)]) == 2
    assert "is not a GPT checkpoint" in capsys.readouterr().err
    # its own out-dir: the README's first command leaves a run in ./out/gpt, which is refused
    nope = ["--data", str(tmp_path / "nope.txt"), "--out-dir", str(tmp_path / "nope")]
    assert cli.main(["train", "gpt", *nope]) == 2
    assert f"no text file {tmp_path / 'nope.txt'} (nor a corpus" in capsys.readouterr().err
