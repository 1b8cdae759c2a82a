"""The training commands' flags: every numeric flag with a range rejects the values just outside
it, by name, from the CLI and from Python, and accepts its bounds; the model configurations
reject sizes the flags pass on to them; `--help` shows defaults only where there is one."""

from __future__ import annotations

import argparse
import dataclasses
import typing

import numpy as np
import pytest

from tinyformer import cli
from tinyformer.checkpoint import save_checkpoint
from tinyformer.models.bert import BertConfig
from tinyformer.models.cnn import CNNConfig
from tinyformer.models.segmentation import SegConfig
from tinyformer.models.seq2seq import Seq2SeqConfig
from tinyformer.models.vilbert import ViLBERTConfig
from tinyformer.models.vit import ViTConfig
from tinyformer.train.args import (
    COUNT,
    EXAMPLES,
    FRACTION,
    POSITIVE,
    PROPER_FRACTION,
    Range,
    add_dataclass_flags,
    dataclass_from_args,
)
from tinyformer.train.cli import TRAINERS
from tinyformer.train.gpt import TrainGPTConfig
from tinyformer.train.rundir import check_out_dir
from tinyformer.train.vision import TrainVisionConfig, load_vision, model_config

# every `tinyformer train NAME`: (NAME, its config class)
COMMANDS = [("gpt", TrainGPTConfig), ("vit", TrainVisionConfig)] + [
    (name, command.config) for name, command in TRAINERS.items()
]
CONFIGS = tuple(config for _, config in COMMANDS)


def test_ranges_include_exactly_their_bounds():
    assert 1 in COUNT and 0 not in COUNT
    assert 1e-9 in POSITIVE and 0 not in POSITIVE
    assert 0 in FRACTION and 1 in FRACTION and -0.1 not in FRACTION and 1.1 not in FRACTION
    assert 0.5 in PROPER_FRACTION and 0 not in PROPER_FRACTION and 1 not in PROPER_FRACTION
    assert 3 in Range(3) and 2 not in Range(3)
    assert [str(r) for r in (COUNT, POSITIVE, FRACTION, PROPER_FRACTION, EXAMPLES)] == [
        "at least 1", "above 0", "in [0, 1]", "in (0, 1)", "in [1, 1000000]"
    ]  # fmt: skip
    assert 10**400 in COUNT  # an int too large for a float is still compared, not an error


def _edges(valid: Range, kind: type) -> tuple[list, list]:
    """Values of `kind` just inside and just outside `valid`."""
    step = 1 if kind is int else 1e-6
    inside, outside = [], []
    if valid.low is not None:
        (outside if valid.open_low else inside).append(kind(valid.low))
        (inside if valid.open_low else outside).append(
            kind(valid.low + (step if valid.open_low else -step))
        )
    if valid.high is not None:
        (outside if valid.open_high else inside).append(kind(valid.high))
        (inside if valid.open_high else outside).append(
            kind(valid.high + (-step if valid.open_high else step))
        )
    return inside, outside


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_ranged_flag_rejects_values_outside_by_name(config):
    ranged = [f for f in dataclasses.fields(config) if f.metadata.get("valid") is not None]
    assert ranged  # each command has flags with ranges (batch size, iterations, ...)
    for field in ranged:
        kind = float if "float" in str(field.type) else int
        inside, outside = _edges(field.metadata["valid"], kind)
        for value in inside:
            assert getattr(config(**{field.name: value}), field.name) == value
        flag = "--" + field.name.replace("_", "-")
        for value in outside:
            with pytest.raises(ValueError, match=f"^{flag} must be .*, got {value}$"):
                config(**{field.name: value})


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gpt", "--iters", "1", "--batch-size", "0"], "--batch-size must be at least 1, got 0"),
        (["gpt", "--iters", "1", "--eval-interval", "0"], "--eval-interval must be at least 1"),
        (["vit", "--iters", "1", "--val-fraction", "1.5"], "--val-fraction must be in (0, 1)"),
        (["bert", "--pretrain-iters", "1", "--seq-len", "2"], "--seq-len must be at least 3"),
        (["seq2seq", "--iters", "1", "--beam", "0"], "--beam must be at least 1, got 0"),
    ],
)
def test_the_cli_reports_a_flag_out_of_range_before_any_work(argv, message, capsys, tmp_path):
    # (one step each, so that a missing check costs seconds, not a whole default run)
    assert cli.main(["train", *argv, "--out-dir", str(tmp_path / "run")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["gpt", "bert", "seq2seq", "cnn"])
def test_an_out_dir_that_cannot_be_written_is_refused_before_any_work(command, capsys, tmp_path):
    # it failed at the first checkpoint, after loading the data and the first evaluation
    (tmp_path / "a_file").write_text("")
    iters = "--pretrain-iters" if command == "bert" else "--iters"
    assert cli.main(["train", command, iters, "1", "--out-dir", str(tmp_path / "a_file/run")]) == 2
    err = capsys.readouterr().err
    assert f"--out-dir {tmp_path / 'a_file/run'}: cannot write there (Not a directory" in err


def test_checking_an_out_dir_makes_nothing(tmp_path):
    check_out_dir(str(tmp_path / "new" / "run"))  # writable: the folders are made, then removed
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ViTConfig(patch_size=0), "ViTConfig: patch_size must be >= 1, got 0"),
        (lambda: ViTConfig(n_layer=0), "ViTConfig: n_layer must be >= 1, got 0"),
        (lambda: ViTConfig(dropout=1.0), r"ViTConfig: dropout must be in \[0, 1\), got 1.0"),
        (lambda: Seq2SeqConfig(10, 10, d_ff=0), "Seq2SeqConfig: d_ff must be >= 1, got 0"),
        (lambda: Seq2SeqConfig(10, 10, dropout=1.0), r"Seq2SeqConfig: dropout must be in \[0, 1\)"),
        (lambda: BertConfig(d_model=0), "BertConfig: d_model must be >= 1, got 0"),
        (lambda: CNNConfig(channels=(16, 0)), r"CNNConfig: channels must be .* got \(16, 0\)"),
        (lambda: CNNConfig(channels=()), r"CNNConfig: channels must be .* got \(\)"),
        (lambda: SegConfig(width=0), "SegConfig: width must be >= 1, got 0"),
    ],
)
def test_model_configurations_reject_sizes_below_one(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_vision_overrides_of_zero_reach_the_model_checks_instead_of_the_defaults():
    images = np.zeros((4, 1, 8, 8), np.float32)
    for name in ("patch_size", "n_layer", "n_embd"):
        cfg = TrainVisionConfig(model="vit", **{name: 0}).resolved()
        with pytest.raises(ValueError, match=f"ViTConfig: {name} must be >= 1, got 0"):
            model_config(cfg, images, 10)


def test_a_split_that_leaves_either_side_empty_is_refused():
    cfg = TrainVisionConfig(model="vit", val_fraction=0.001).resolved()
    with pytest.raises(ValueError, match="leaves 1797 for training and 0 for validation"):
        load_vision(cfg)
    cfg = TrainVisionConfig(model="unet", shapes=1, image_size=16).resolved()
    with pytest.raises(ValueError, match="leaves 0 for training and 1 for validation"):
        load_vision(cfg)


@pytest.mark.parametrize("model", ["gpt", "bert", "seq2seq", "vit"])
def test_help_states_a_default_only_where_there_is_one(model, capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", model, "--help"])
    text = capsys.readouterr().out
    assert "(default: None)" not in text
    assert "(default: " in text  # the flags that have one still say it


def _numeric_flags(config: type) -> list[tuple[str, type, Range | None]]:
    hints = typing.get_type_hints(config)
    found = []
    for field in dataclasses.fields(config):
        kind = next(
            (
                k
                for k in (int, float)
                if k in (hints[field.name], *typing.get_args(hints[field.name]))
            ),
            None,
        )
        if kind is not None:
            found.append(("--" + field.name.replace("_", "-"), kind, field.metadata.get("valid")))
    return found


@pytest.mark.parametrize("command, config", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_every_numeric_flag_is_refused_as_the_settings_are_made(command, config):
    # `--warmup -5` reached a scheduler's check after ViLBERT's data were built; NaN trained.
    # The flags as the command reads them: argparse's conversion, then the settings' checks,
    # the first thing every command does.
    parser = argparse.ArgumentParser(prog=f"tinyformer train {command}")
    add_dataclass_flags(parser, config, skip=("model",) if config is TrainVisionConfig else ())
    parser.set_defaults(model="vit")
    flags = _numeric_flags(config)
    assert flags
    for flag, kind, valid in flags:
        outside = ["nan", "inf", "-inf"] if kind is float else []
        if valid is not None:
            outside += [str(v) for v in _edges(valid, kind)[1]]
        for text in outside:
            args = parser.parse_args([f"{flag}={text}"])
            with pytest.raises(ValueError, match=f"^{flag} must be "):
                dataclass_from_args(config, args)
        if valid is not None:  # the bounds themselves pass
            for value in _edges(valid, kind)[0]:
                made = dataclass_from_args(config, parser.parse_args([flag, str(value)]))
                assert getattr(made, flag[2:].replace("-", "_")) == value


@pytest.mark.parametrize(
    "argv, message",
    [
        (["vilbert", "--test-scenes", "1000000000"], "--test-scenes must be in [1, 1000000], got"),
        (["vilbert", "--finetune-examples", "10000000"], "--finetune-examples must be in [1, "),
        (["vilbert", "--weight-decay", "-1"], "--weight-decay must be at least 0, got -1.0"),
        (["vilbert", "--warmup", "-5"], "--warmup must be at least 0, got -5"),
        (["vilbert", "--dropout", "1"], "--dropout must be in [0, 1), got 1.0"),
        (["xlm", "--train-pairs", "100000000"], "--train-pairs must be in [1, 1000000]"),
        (["unet", "--shapes", "100000000"], "--shapes must be in [1, 1000000]"),
        (["gpt", "--lr", "nan"], "--lr must be a finite number, got nan"),
    ],
)
def test_the_sweep_s_numbers_are_refused_before_any_work(argv, message, capsys, tmp_path):
    assert cli.main(["train", *argv, "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_a_count_written_as_a_float_is_refused_naming_the_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "rlhf", "--prompt-len", "1e8"])
    assert exit_.value.code == 2
    assert "argument --prompt-len: invalid int value: '1e8'" in capsys.readouterr().err


def test_shapes_that_cannot_fit_in_memory_are_refused_by_name(capsys, tmp_path):
    # within the count's ceiling, but 1000000 images of 4096 x 4096 pixels
    argv = ["train", "unet", "--shapes", "1000000", "--image-size", "4096", "--iters", "1"]
    assert cli.main([*argv, "--out-dir", str(tmp_path / "run")]) == 2
    assert "--shapes 1000000 --image-size 4096: the images would hold at least" in (
        capsys.readouterr().err
    )


def test_rlhf_blames_a_sequence_too_long_on_the_lengths(capsys, tmp_path):
    # it blamed --batch-size, which no value could have fixed
    argv = ["train", "rlhf", "--prompt-len", "100000000", "--init", str(tmp_path / "base")]
    assert cli.main([*argv, "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "--prompt-len 100000000 --completion-len 24: the activations of one pair" in err
    assert "--batch-size" not in err and not (tmp_path / "base").exists()


@pytest.mark.parametrize("iteration", [3, 10])  # stopped, and finished
def test_rlhf_init_at_another_command_s_run_is_not_called_a_gpt_run(iteration, capsys, tmp_path):
    init = tmp_path / "vilbert" / "pretrain"
    meta = {"model_config": dataclasses.asdict(ViLBERTConfig(vocab_size=20)),
            "iteration": iteration, "train_config": {"iters": 10}}  # fmt: skip
    save_checkpoint(init / "ckpt.npz", {"model/w": np.zeros(2, np.float32)}, meta)
    argv = ["train", "rlhf", "--init", str(init), "--out-dir", str(tmp_path / "run")]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "GPT run stopped" not in err
    assert "not a GPT" in err and str(init) in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gpt", "--n-embd", "100000000", "--n-head", "1"],
         "--n-layer 4 --n-embd 100000000 --block-size 64: one example alone would keep"),
        (["bert", "--d-model", "100000000", "--n-head", "1"],
         "--n-layer 2 --d-model 100000000 --d-ff 512 --seq-len 64: one example alone"),
        (["siren", "--size", "1000000"], "--size 1000000 --hidden 128 --n-layers 3: one full"),
        (["vilbert", "--d-text", "100000000", "--n-head", "1"],
         "--d-text 100000000 --d-image 64 --n-co-layer 2: the model's weights would hold"),
        (["xlm", "--d-ff", "100000000"], "--n-layer 2 --d-model 64 --d-ff 100000000: the encoder"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)  # fmt: skip
def test_a_model_that_cannot_fit_blames_its_sizes_not_the_batch(argv, message, capsys, tmp_path):
    # they blamed --batch-size (which no value could fix), or allocated for minutes
    assert cli.main(["train", *argv, "--out-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and "--batch-size " not in err.split("whatever")[0]


def test_one_example_too_big_is_said_apart_from_a_batch_too_big(monkeypatch):
    from tinyformer.train import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 1000)
    with pytest.raises(
        ValueError, match=r"^--n-embd 9: one example alone .* whatever --batch-size"
    ):
        memory.check_batch_fits(1, 1001, "x", sizes="--n-embd 9")
    with pytest.raises(ValueError, match=r"^--batch-size 2: .* at most 1 could fit"):
        memory.check_batch_fits(2, 1000, "x", sizes="--n-embd 9")
