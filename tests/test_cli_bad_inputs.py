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
from tinyformer.train import memory
from tinyformer.train.bahdanau import TrainBahdanauConfig
from tinyformer.train.bert import TrainBertConfig
from tinyformer.train.gpt import TrainGPTConfig
from tinyformer.train.mae import TrainMAEConfig
from tinyformer.train.seq2seq import TrainSeq2SeqConfig
from tinyformer.train.siren import TrainSirenConfig
from tinyformer.train.vision import TrainVisionConfig

TRAIN_CONFIGS = (
    TrainGPTConfig, TrainBertConfig, TrainSeq2SeqConfig, TrainBahdanauConfig, TrainVisionConfig,
    TrainMAEConfig, TrainSirenConfig,
)  # fmt: skip


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


@pytest.mark.parametrize("config", TRAIN_CONFIGS, ids=lambda c: c.__name__)
def test_contradicting_and_nonsense_settings_are_refused_by_name(config):
    fields = {f.name for f in config.__dataclass_fields__.values()}
    if "weight_decay" in fields:  # a negative decay grows the weights
        with pytest.raises(ValueError, match=r"^--weight-decay must be at least 0, got -1.0$"):
            config(weight_decay=-1.0)
    if "warmup" in fields:  # the schedule refused it, naming its own arguments
        with pytest.raises(ValueError, match=r"^--warmup must be at least 0, got -1$"):
            config(warmup=-1)
    if "dropout" in fields:  # the model's configuration refused it, naming its field
        with pytest.raises(ValueError, match=r"^--dropout must be in \[0, 1\), got 1.0$"):
            config(dropout=1.0)
    with pytest.raises(ValueError, match="^--resume and --overwrite conflict"):
        config(resume=True, overwrite=True)
    with pytest.raises(ValueError, match="^--out-dir must name a folder, got ''$"):
        config(out_dir="")


def test_bpe_vocabulary_and_data_dir_are_checked_with_the_other_flags(tmp_path):
    with pytest.raises(ValueError, match="^--bpe-vocab-size must be at least 256, got 10$"):
        TrainGPTConfig(bpe_vocab_size=10)
    with pytest.raises(ValueError, match=r"^--beta2 must be in \[0, 1\), got 1.0$"):
        TrainGPTConfig(beta2=1.0)
    # every date held out left none to train on: numpy's "high <= 0" at the first batch
    for config in (TrainSeq2SeqConfig, TrainBahdanauConfig):
        with pytest.raises(ValueError, match=r"^--test-dates must be in \[1, 73048\], got 73049"):
            config(test_dates=73049)
    # --data-dir with the default data trained on the embedded digits, silently
    with pytest.raises(ValueError, match="--data-dir .* needs --data mnist .*not the default"):
        TrainVisionConfig(model="vit", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="needs --data mnist or fashion-mnist, not digits"):
        TrainMAEConfig(data_dir=str(tmp_path))
    with pytest.raises(ValueError, match=f"^--data-dir {tmp_path / 'nope'}: no such folder$"):
        TrainVisionConfig(model="vit", data="mnist", data_dir=str(tmp_path / "nope"))


def test_a_batch_floor_above_memory_is_refused(monkeypatch):
    monkeypatch.setattr(memory, "physical_memory", lambda: 1000)
    memory.check_batch_fits(10, 100, "x")  # exactly the machine's memory: allowed
    with pytest.raises(ValueError, match=r"^--batch-size 11: .* at most 10 could fit"):
        memory.check_batch_fits(11, 100, "x")
    memory.check_batch_fits(11, 100, "x", device="cuda")  # a GPU's memory is not read


@pytest.mark.parametrize(
    "argv",
    [
        ["gpt", "--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--block-size", "8"],
        ["bert", "--held-out", "10", "--n-layer", "1", "--d-model", "8", "--n-head", "1"],
        ["seq2seq"], ["bahdanau"], ["vit"], ["swin"], ["cnn"], ["unet", "--shapes", "8"],
        ["mae"],
    ],
    ids=lambda argv: argv[0],
)  # fmt: skip
def test_every_trainer_refuses_a_batch_that_cannot_fit(argv, corpus, tmp_path, capsys, monkeypatch):
    # --batch-size 100000000 spent minutes allocating: here the machine has 1 MiB
    monkeypatch.setattr(memory, "physical_memory", lambda: 2**20)
    data = ["--data", corpus] if argv[0] in ("gpt", "bert") else []
    iters = ["--pretrain-iters" if argv[0] in ("bert", "mae") else "--iters", "1"]
    run = ["train", *argv, *data, *iters, "--batch-size", "4096", "--no-progress"]
    assert cli.main([*run, "--out-dir", str(tmp_path / "run")]) == 2
    assert "--batch-size 4096: one training step would keep at least" in capsys.readouterr().err


def test_bert_refuses_a_batch_larger_than_its_fine_tuning_sentences(tmp_path, capsys):
    # fine-tuning draws a batch without repeats: numpy's error came after all of pretraining
    text = tmp_path / "sentences.txt"
    text.write_text("".join(f"The cat number {i} sat quietly on the old mat. " for i in range(60)))
    argv = ["train", "bert", "--data", str(text), "--held-out", "10", "--batch-size", "51",
            "--vocab-size", "200", "--out-dir", str(tmp_path / "run")]  # fmt: skip
    assert cli.main(argv) == 2
    assert "--batch-size 51 is more than the 50 sentences" in capsys.readouterr().err


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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sample", "--ckpt", "x", "--tokens", "-1"], "argument --tokens: must be at least 0"),
        (["sample", "--ckpt", "x", "--temperature", "0"], "--temperature: must be above 0, got"),
        (["sample", "--ckpt", "x", "--top-k", "-1"], "argument --top-k: must be at least 0"),
        (["sample", "--ckpt", "x", "--top-p", "nan"], "argument --top-p: must be in (0, 1]"),
        (["gradcheck", "--samples", "1.5"], "--samples: expected a whole number, got '1.5'"),
        (["sample", "--ckpt", "x", "--seed", "-1"], "argument --seed: must be at least 0, got -1"),
        (["bughunt", "--op", "softmax", "--seed", "-1"], "--seed: must be at least 0, got -1"),
    ],
)
def test_sampling_and_gradcheck_numbers_are_checked_when_parsed(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_run_started_with_overwrite_resumes(tmp_path, capsys):
    # the saved settings hold overwrite=True, which with --resume is refused as a conflict
    text = tmp_path / "corpus.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    tiny = ["--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--block-size", "8",
            "--eval-iters", "1", "--no-progress", "--sample-tokens", "0",
            "--out-dir", str(tmp_path / "run")]  # fmt: skip
    assert (
        cli.main(["train", "gpt", "--data", str(text), "--iters", "1", "--overwrite", *tiny]) == 0
    )
    assert cli.main(["train", "gpt", "--resume", "--iters", "2", *tiny]) == 0, capsys.readouterr()


@pytest.mark.parametrize(
    "argv, message",
    [  # the first failed at the first step, naming no flag; the others trained on blank images
        (["unet", "--image-size", "6"], "--image-size must be a multiple of 4 for --model unet"),
        (["vit", "--augment-shift", "8"], "--augment-shift must be below the images' side of 8"),
        (["mae", "--augment-shift", "100"], "--augment-shift must be below the images' side"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_image_sizes_and_shifts_that_leave_no_image_are_refused(argv, message, tmp_path, capsys):
    iters = "--pretrain-iters" if argv[0] == "mae" else "--iters"
    run = ["train", *argv, iters, "1", "--no-progress", "--out-dir", str(tmp_path / "run")]
    assert cli.main(run) == 2
    assert message in capsys.readouterr().err


def test_a_corpus_without_line_breaks_trains_and_samples(tmp_path, capsys):
    # the closing sample and `sample`'s default prompt were a newline, which a character
    # vocabulary of such a corpus lacks: a finished run exited 2 with the tokenizer's error
    text = tmp_path / "one_line.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    out = tmp_path / "run"
    argv = ["train", "gpt", "--data", str(text), "--n-layer", "1", "--n-head", "1", "--n-embd",
            "8", "--block-size", "8", "--iters", "1", "--eval-iters", "1", "--sample-tokens",
            "5", "--no-progress", "--out-dir", str(out)]  # fmt: skip
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert "--- sample ---" in capsys.readouterr().out
    assert cli.main(["sample", "--ckpt", str(out), "--tokens", "5"]) == 0


def test_ctrl_c_in_any_command_exits_130_without_a_traceback(monkeypatch, capsys):
    # `tinyformer gradcheck --samples 1000000000`, then Ctrl-C: a KeyboardInterrupt traceback
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_gradcheck_all", interrupted)
    assert cli.main(["gradcheck", "--samples", "1000000000"]) == 130
    assert capsys.readouterr().err == "tinyformer gradcheck: interrupted\n"
