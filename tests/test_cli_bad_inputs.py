"""Bad input to the `tinyformer` commands: each gets a one-line error that names the argument
and the value (exit status 2), never a traceback nor a silently wrong result. Closed and
broken output streams, unwritable output places, nonsense numbers, flags that contradict each
other, missing data, weights that are NaN, a full disk."""

from __future__ import annotations

import dataclasses
import errno
import io
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.test_pretrained import _hf_tensors, _write_checkpoint
from tinyformer import cli, fileio
from tinyformer.checkpoint import save_checkpoint
from tinyformer.data import CharTokenizer
from tinyformer.models.gpt import GPT, GPTConfig


def _tinyformer(*argv: str, close: int) -> subprocess.CompletedProcess:
    """The command line in a fresh process whose descriptor `close` (1: stdout, 2: stderr) is
    closed, as `>&-` or `2>&-` leave it."""
    return subprocess.run(
        [sys.executable, "-m", "tinyformer.cli", *argv],
        stdout=None if close == 1 else subprocess.PIPE,
        stderr=None if close == 2 else subprocess.PIPE,
        preexec_fn=lambda: os.close(close),
        text=True,
        timeout=120,
    )


def test_a_closed_stdout_or_stderr_is_written_as_dev_null():
    # a closed stdout was an AttributeError (sys.stdout is None) in every command
    done = _tinyformer("params", "gpt", close=1)
    assert done.returncode == 0 and done.stderr == ""
    # a closed stderr: the error was printed to stdout instead (print's file=None)
    done = _tinyformer("params", "gpt", "--config", "nope", close=2)
    assert done.returncode == 2 and done.stdout == ""


class _BrokenPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_an_error_into_a_broken_pipe_still_exits_2(monkeypatch):
    # `tinyformer params gpt --config nope 2>&1 | head -0`: the error met a closed pipe
    monkeypatch.setattr(sys, "stderr", _BrokenPipe())
    assert cli.main(["params", "gpt", "--config", "nope"]) == 2


def test_bughunt_refuses_an_out_that_cannot_hold_its_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "a_file").write_text("")
    assert cli.main(["bughunt", "--op", "softmax", "--out", str(tmp_path / "a_file")]) == 2
    err = capsys.readouterr().err
    assert f"--out {tmp_path / 'a_file'}: cannot write there (Not a directory" in err

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path))

    with monkeypatch.context() as patch:  # root writes anywhere: a read-only folder, mocked
        patch.setattr(fileio.tempfile, "TemporaryFile", read_only)
        assert cli.main(["bughunt", "--op", "softmax", "--out", str(tmp_path)]) == 2
    assert "cannot write there (Permission denied" in capsys.readouterr().err
    (tmp_path / "bughunt_softmax.py").mkdir()  # a folder where the file goes
    assert cli.main(["bughunt", "--op", "softmax", "--out", str(tmp_path)]) == 2
    assert "bughunt_softmax.py: [Errno 21] Is a directory" in capsys.readouterr().err


def test_a_failed_write_names_the_target_not_the_temporary_file(tmp_path, monkeypatch):
    # `grade --json DIR` and a read-only folder named the hidden .NAME.<pid>.<random>.tmp
    with pytest.raises(IsADirectoryError, match=f"Is a directory: '{tmp_path}'$"):
        fileio.save_json(tmp_path, {})

    def read_only(dir, prefix, suffix):  # noqa: A002 (mkstemp's names)
        raise PermissionError(errno.EACCES, "Permission denied", f"{dir}/{prefix}x{suffix}")

    monkeypatch.setattr(fileio.tempfile, "mkstemp", read_only)
    with pytest.raises(PermissionError, match=f"Permission denied: '{tmp_path / 'r.json'}'$"):
        fileio.save_json(tmp_path / "r.json", {})


class _FullDisk(io.BufferedIOBase):
    """A file on a full disk: every write fails, as the OS says it, naming no file."""

    def __init__(self, file: io.BufferedIOBase) -> None:
        self.file = file

    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.file.tell()

    def fileno(self) -> int:
        return self.file.fileno()

    def close(self) -> None:
        self.file.close()
        super().close()


def test_a_full_disk_during_training_names_the_file(corpus, tmp_path, capsys, monkeypatch):
    fdopen = os.fdopen
    monkeypatch.setattr(fileio.os, "fdopen", lambda *args, **kw: _FullDisk(fdopen(*args, **kw)))
    out = tmp_path / "run"
    argv = ["train", "gpt", "--data", corpus, "--n-layer", "1", "--n-head", "1", "--n-embd", "8",
            "--block-size", "8", "--iters", "1", "--eval-iters", "1", "--no-progress",
            "--out-dir", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"No space left on device: '{out / 'ckpt.npz'}'" in err
    assert not list(tmp_path.rglob("*.tmp"))


def test_sample_refuses_nan_weights(tmp_path, capsys):
    config = GPTConfig(block_size=8, vocab_size=3, n_layer=1, n_head=1, n_embd=8)
    weights = {f"model/{k}": v.data for k, v in GPT(config).state_dict().items()}
    weights["model/ln_f.weight"][0] = np.nan
    meta = {"model_config": dataclasses.asdict(config), "tokenizer": CharTokenizer("abc").to_dict()}
    save_checkpoint(tmp_path / "ckpt.npz", weights, meta)
    # it printed garbage and exited 0
    assert cli.main(["sample", "--ckpt", str(tmp_path), "--tokens", "5"]) == 2
    err = capsys.readouterr().err
    assert "ckpt.npz: the weights ln_f.weight hold NaN or infinite values" in err


def test_embed_refuses_nan_weights(tmp_path, capsys):
    tensors = _hf_tensors(np.random.default_rng(0))
    tensors["pooler.dense.bias"][3] = np.inf
    path = _write_checkpoint(tmp_path / "bert", tensors)
    assert cli.main(["embed", "--model", str(path), "a cat"]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors: the weights pooler.dense.bias hold NaN or infinite" in err
