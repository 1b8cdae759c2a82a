"""Loaders never crash on a damaged or hostile file: they load it as saved, or refuse it with one
clear error that names the file. Real files (a tiny GPT run, a tiny image-model run, a tiny
BERT directory) are cut, bit-flipped, zeroed and spliced with a seeded generator, and every
result goes through the library loaders and the command line (`sample`, `eval`, `embed`).
Then run checkpoints whose metadata is damaged in ways a zip's checks cannot see."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from tinyformer import cli, nn
from tinyformer import random as tf_random
from tinyformer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from tinyformer.models.gpt import GPTConfig
from tinyformer.safetensors import SafetensorsError, load_file
from tinyformer.train import TrainGPTConfig, train_gpt
from tinyformer.train.state import config_from_checkpoint, load_run, restore_run
from tinyformer.train.vision import TrainVisionConfig, train_vision

from .test_pretrained import _hf_tensors, _write_checkpoint

TEXT = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(60))


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpt")
    (root / "corpus.txt").write_text(TEXT, encoding="utf-8")
    cfg = TrainGPTConfig(
        data=str(root / "corpus.txt"), n_layer=1, n_head=2, n_embd=16, block_size=16, iters=4,
        batch_size=4, warmup=2, eval_interval=2, eval_iters=1, out_dir=str(root / "run"),
        sample_tokens=0, progress=False,
    )  # fmt: skip
    train_gpt(cfg)
    return root / "run" / "ckpt.npz"


@pytest.fixture(scope="module")
def vision_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("vision") / "fcn"
    cfg = TrainVisionConfig(
        model="fcn", shapes=40, image_size=8, width=4, iters=2, eval_interval=2, batch_size=8,
        warmup=1, out_dir=str(out), progress=False,
    )  # fmt: skip
    train_vision(cfg)
    return out / "ckpt.npz"


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bert") / "tiny-bert"
    return _write_checkpoint(path, _hf_tensors(np.random.default_rng(0)))


# -- damage -------------------------------------------------------------------------------------


def _damages(data: bytes, rng: np.random.Generator, count: int) -> list[tuple[str, bytes]]:
    """`count` damaged copies of `data`, each with what was done to it."""
    n = len(data)
    index_at = data.rfind(b"PK\x01\x02")  # a zip's central directory (its index), if any
    out = []
    for i in range(count):
        d = bytearray(data)
        kind = i % 8
        if kind == 0:
            cut = int(rng.integers(0, n))
            out.append((f"truncated to {cut}", bytes(d[:cut])))
            continue
        if kind in (1, 2):  # one flipped byte, anywhere or in the index
            lo = index_at if kind == 2 and index_at > 0 else 0
            at = int(rng.integers(lo, n))
            d[at] ^= int(rng.integers(1, 256))
            what = f"byte {at} flipped"
        elif kind == 3:
            ats = rng.integers(0, n, int(rng.integers(2, 9)))
            for at in ats:
                d[at] ^= int(rng.integers(1, 256))
            what = f"bytes {sorted(ats.tolist())} flipped"
        elif kind == 4:
            width = int(rng.integers(1, 64))
            d[:width] = bytes(width)
            what = f"first {width} bytes zeroed"
        elif kind == 5:
            at, width = int(rng.integers(0, n)), int(rng.integers(4, 256))
            d[at : at + width] = bytes(len(d[at : at + width]))
            what = f"bytes {at}..{at + width} zeroed"
        elif kind == 6:
            at, width = int(rng.integers(0, n)), int(rng.integers(1, 64))
            d[at:at] = d[at : at + width]
            what = f"bytes {at}..{at + width} duplicated"
        else:
            at, width = int(rng.integers(0, n)), int(rng.integers(1, 64))
            del d[at : at + width]
            what = f"bytes {at}..{at + width} deleted"
        out.append((what, bytes(d)))
    return out


def refused_in_one_line(argv: list[str], path, capsys) -> int:
    """Run the command; a failure must be exactly one stderr line naming `path`."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    if code != 0:
        assert code == 2, err
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert str(path) in err, err
    return code


def _same_checkpoint(path, arrays, meta) -> bool:
    """True when `path` loads as exactly `arrays` and `meta`; False when it is refused with a
    CheckpointError naming it. Anything else fails the test."""
    try:
        got, got_meta = load_checkpoint(path)
    except CheckpointError as err:
        assert str(path) in str(err)
        return False
    assert got.keys() == arrays.keys() and got_meta == meta
    for name, array in arrays.items():
        assert got[name].dtype == array.dtype and np.array_equal(got[name], array), name
    return True


# -- fuzzing ------------------------------------------------------------------------------------


def test_damaged_gpt_checkpoints_load_as_saved_or_are_refused_naming_the_file(
    gpt_run, tmp_path, capsys
):
    arrays, meta = load_checkpoint(gpt_run)
    rng = np.random.default_rng(1234)
    for i, (what, data) in enumerate(_damages(gpt_run.read_bytes(), rng, 64)):
        path = tmp_path / f"damaged{i}.npz"
        path.write_bytes(data)
        loads = _same_checkpoint(path, arrays, meta)
        if not loads:
            with pytest.raises(CheckpointError, match=re.escape(str(path))):
                load_run(path)
        code = refused_in_one_line(["sample", "--ckpt", str(path), "--tokens", "2"], path, capsys)
        assert (code == 0) == loads, what


def test_damaged_vision_checkpoints_evaluate_or_are_refused_naming_the_file(
    vision_run, tmp_path, capsys
):
    arrays, meta = load_checkpoint(vision_run)
    rng = np.random.default_rng(99)
    for i, (what, data) in enumerate(_damages(vision_run.read_bytes(), rng, 24)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        (folder / "ckpt.npz").write_bytes(data)
        loads = _same_checkpoint(folder / "ckpt.npz", arrays, meta)
        code = refused_in_one_line(["eval", "--ckpt", str(folder)], folder, capsys)
        assert (code == 0) == loads, what


def test_damaged_safetensors_load_as_declared_or_are_refused_naming_the_file(
    bert_dir, tmp_path, capsys
):
    """safetensors has no checksum: a flipped data byte loads (as another number), so the check
    is that whatever loads is what the header declares, and that nothing crashes."""
    original = load_file(bert_dir / "model.safetensors")
    rng = np.random.default_rng(7)
    for i, (what, data) in enumerate(
        _damages((bert_dir / "model.safetensors").read_bytes(), rng, 64)
    ):
        folder = tmp_path / f"bert{i}"
        shutil.copytree(bert_dir, folder)
        path = folder / "model.safetensors"
        path.write_bytes(data)
        try:
            tensors = load_file(path)
        except SafetensorsError as err:
            assert str(path) in str(err), what
        else:
            for name, array in tensors.items():
                if name in original:
                    assert array.shape == original[name].shape, (what, name)
        with np.errstate(all="ignore"):  # shifted data can be any float: inf and NaN too
            refused_in_one_line(["embed", "--model", str(folder), "the cat"], folder, capsys)


def test_damaged_vocab_and_config_files_are_refused_naming_the_file(bert_dir, tmp_path, capsys):
    rng = np.random.default_rng(5)
    for name in ("config.json", "vocab.txt"):
        data = (bert_dir / name).read_bytes()
        for i, (_, damaged) in enumerate(_damages(data, rng, 24)):
            folder = tmp_path / f"{name}{i}"
            shutil.copytree(bert_dir, folder)
            (folder / name).write_bytes(damaged)
            refused_in_one_line(["embed", "--model", str(folder), "a cat"], folder, capsys)


# -- run checkpoints: metadata, configurations, the command line --------------------------------


def _edited(src, dst, meta_change=None, array_change=None):
    arrays, meta = load_checkpoint(src)
    if meta_change:
        meta_change(meta)
    if array_change:
        array_change(arrays)
    save_checkpoint(dst, arrays, meta)
    return dst


@pytest.mark.parametrize(
    "key", ["rng", "model_config", "optimizer", "scheduler", "log", "iteration", "train_config"]
)
def test_load_run_names_the_file_and_a_missing_key(gpt_run, tmp_path, key):
    path = _edited(gpt_run, tmp_path / "c.npz", lambda m: m.pop(key))
    with pytest.raises(CheckpointError, match=rf"c.npz: its metadata's '{key}' is missing"):
        load_run(path, resume=True)
    if key in ("rng", "optimizer", "scheduler"):  # reading the weights does not need them
        with pytest.raises(CheckpointError, match=rf"c.npz: its metadata's '{key}' is missing"):
            restore_run(load_run(path)[1], None, None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(iteration="4"), "'iteration' is str, not int"),
        (lambda m: m.update(iteration=9), "'iteration' is 9, but its log holds 4 steps"),
        (lambda m: m["log"].update(loss="x"), r"log\['loss'\] is not a list of numbers"),
        (lambda m: m["optimizer"]["param_groups"][0].update(lr="fast"), r"\['lr'\] is 'fast'"),
        (lambda m: m["optimizer"].update(scalars=[]), r"optimizer\['scalars'\] is not an obj"),
        (lambda m: m["scheduler"].pop("last_step"), "'scheduler' lacks last_step"),
        (lambda m: m["rng"].update(batches=3), r"rng\['batches'\] is not a generator state"),
    ],
)
def test_load_run_names_a_malformed_entry(gpt_run, tmp_path, change, message):
    with pytest.raises(CheckpointError, match=message):
        load_run(_edited(gpt_run, tmp_path / "c.npz", change))


def test_restore_run_names_the_file_for_a_state_that_does_not_fit(gpt_run, tmp_path):
    from tinyformer.optim import SGD, WarmupCosineLR

    def bad_rng(meta):
        meta["rng"]["tinyformer"]["bit_generator"] = "MT19937"

    _, meta = load_run(_edited(gpt_run, tmp_path / "c.npz", bad_rng))
    optimizer = SGD([nn.Parameter(np.ones(2))], lr=0.1)
    before = tf_random.get_rng_state()
    with pytest.raises(CheckpointError, match="c.npz: cannot be loaded"):
        restore_run(meta, optimizer, WarmupCosineLR(optimizer, 1, 2), np.random.default_rng(0))
    assert tf_random.get_rng_state() == before  # refused before anything changed


def test_config_from_checkpoint_refuses_wrong_settings_and_absurd_sizes(gpt_run):
    state, meta = load_run(gpt_run)
    good = meta["model_config"]
    assert config_from_checkpoint(gpt_run, GPTConfig, good, state) == GPTConfig(**good)
    for data, message in [
        ({**good, "n_embed": 16}, "model_config has unknown setting 'n_embed'"),
        ({**good, "n_embd": "16"}, "model_config 'n_embd' is '16', not int"),
        ({**good, "bias": 1}, "model_config 'bias' is 1, not bool"),
        ({**good, "n_head": 3}, "n_embd 16 is not divisible by n_head 3"),
        ({**good, "n_embd": 300000}, r"describes [\d,]+ parameters but the checkpoint holds"),
        ([1, 2], "model_config is not a JSON object"),
    ]:
        with pytest.raises(CheckpointError, match=message) as err:
            config_from_checkpoint(gpt_run, GPTConfig, data, state)
        assert str(gpt_run) in str(err.value)


def test_sample_refuses_bad_checkpoints_in_one_line(gpt_run, tmp_path, capsys):
    def wrong_shape(arrays):
        arrays["model/wte.weight"] = arrays["model/wte.weight"][:-1]

    def break_tokenizer(meta):
        meta["tokenizer"] = {"type": "bpe", "merges": [[1]]}

    for name, meta_change, array_change in [
        ("shape", None, wrong_shape),  # was a StateDictError traceback
        ("huge", lambda m: m["model_config"].update(n_embd=300000), None),  # was a MemoryError
        ("type", lambda m: m["model_config"].update(n_embd="16"), None),  # was a TypeError
        ("tokenizer", break_tokenizer, None),  # was a ValueError naming no file
        ("rng", lambda m: m.update(rng=3), None),  # unused by sampling, but damaged
    ]:
        path = _edited(gpt_run, tmp_path / f"{name}.npz", meta_change, array_change)
        argv = ["sample", "--ckpt", str(path), "--tokens", "2"]
        assert refused_in_one_line(argv, path, capsys) == 2, name


def test_resume_refuses_a_checkpoint_without_rng_in_one_line(gpt_run, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    _edited(gpt_run, run / "ckpt.npz", lambda m: m.pop("rng"))
    corpus = gpt_run.parent.parent / "corpus.txt"
    argv = ["train", "gpt", "--resume", "--out-dir", str(run), "--data", str(corpus),
            "--no-progress"]  # fmt: skip
    assert refused_in_one_line(argv, run, capsys) == 2  # was KeyError: 'rng'


def test_eval_refuses_an_unknown_model_kind_in_one_line(vision_run, tmp_path, capsys):
    path = _edited(vision_run, tmp_path / "c.npz", lambda m: m.update(model_kind="resnet"))
    assert refused_in_one_line(["eval", "--ckpt", str(path)], path, capsys) == 2
