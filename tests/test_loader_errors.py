"""One test per way a damaged or hostile file used to get through a loader as a traceback, as
arrays silently missing, or as a message naming no file; tests/test_loader_fuzz.py damages real
files at random."""

from __future__ import annotations

import errno
import json
import re
import shutil
import zipfile

import numpy as np
import pytest

import tinyformer as tf
from tinyformer import nn
from tinyformer.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from tinyformer.data import tokenizer_from_dict
from tinyformer.models.pretrained import PretrainedError, load_bert
from tinyformer.safetensors import SafetensorsError, load_file, save_file
from tinyformer.train.state import checkpoint_errors

from .test_loader_fuzz import refused_in_one_line
from .test_pretrained import _hf_tensors, _write_checkpoint


@pytest.fixture
def bert_dir(tmp_path):
    return _write_checkpoint(tmp_path / "tiny-bert", _hf_tensors(np.random.default_rng(0)))


# -- checkpoints: the manifest ------------------------------------------------------------------


def _rewrite_zip(src, dst, rename: dict[str, str] | None = None, drop: str | None = None) -> None:
    """Copy an .npz with one entry dropped or entries renamed: what a damaged zip index shows."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            if item.filename != drop:
                zout.writestr((rename or {}).get(item.filename, item.filename), zin.read(item))


def test_manifest_catches_an_array_the_zip_index_lost_or_renamed(tmp_path):
    path = tmp_path / "c.npz"
    save_checkpoint(path, {"model/a": np.ones(3), "model/b": np.arange(4.0)}, {"iteration": 1})
    _rewrite_zip(path, tmp_path / "lost.npz", drop="model/b.npy")
    with pytest.raises(CheckpointError, match=r"lost.npz is damaged: array 'model/b' is missing"):
        load_checkpoint(tmp_path / "lost.npz")
    _rewrite_zip(path, tmp_path / "renamed.npz", rename={"model/b.npy": "model/c.npy"})
    with pytest.raises(CheckpointError, match=r"renamed.npz is damaged: array 'model/b'"):
        load_checkpoint(tmp_path / "renamed.npz")


def test_manifest_catches_a_changed_array_and_old_checkpoints_still_load(tmp_path):
    path = tmp_path / "c.npz"
    save_checkpoint(path, {"w": np.arange(6.0)}, {"iteration": 3})
    arrays, meta = load_checkpoint(path)
    assert "manifest" not in meta and meta["iteration"] == 3
    with np.load(path) as f:
        document = json.loads(str(f["__meta__"]))
    # the same entry count and names, one value changed: the zip's CRC is rewritten to match
    np.savez(tmp_path / "changed.npz", __meta__=np.array(json.dumps(document)), w=np.ones(6))
    with pytest.raises(CheckpointError, match=r"changed.npz is damaged: array 'w' has crc32"):
        load_checkpoint(tmp_path / "changed.npz")
    np.savez(
        tmp_path / "cast.npz",
        __meta__=np.array(json.dumps(document)),
        w=np.arange(6.0, dtype=np.float32),
    )
    with pytest.raises(CheckpointError, match=r"cast.npz is damaged: array 'w' has dtype <f4"):
        load_checkpoint(tmp_path / "cast.npz")
    del document["manifest"]  # as written before the manifest: read without the check
    np.savez(tmp_path / "old.npz", __meta__=np.array(json.dumps(document)), w=np.ones(6))
    assert np.array_equal(load_checkpoint(tmp_path / "old.npz")[0]["w"], np.ones(6))
    np.savez(tmp_path / "text.npz", __meta__=np.array(json.dumps(document)), w=np.array(["x"]))
    with pytest.raises(CheckpointError, match=r"text.npz: array 'w' has dtype <U1, not a number"):
        load_checkpoint(tmp_path / "text.npz")
    with pytest.raises(ValueError, match="'manifest' are the file's own names"):
        save_checkpoint(path, {"w": np.ones(2)}, {"manifest": {}})
    with pytest.raises(ValueError, match="array 'w' has dtype object, not numbers"):
        save_checkpoint(path, {"w": np.array([None])}, {})


def test_disk_full_names_the_file_and_leaves_nothing_behind(tmp_path, monkeypatch):
    path = tmp_path / "c.npz"

    def full(file, **arrays):
        file.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", full)
    with pytest.raises(OSError, match="No space left on device") as err:
        save_checkpoint(path, {"w": np.ones(2)}, {})
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(path)
    assert str(path) in str(err.value) and list(tmp_path.iterdir()) == []


def test_checkpoint_errors_name_the_file_and_let_bugs_through(tmp_path):
    path = tmp_path / "c.npz"
    for error in (MemoryError(), KeyError("rng"), nn.StateDictError("missing keys: w")):
        with pytest.raises(CheckpointError, match=re.escape(str(path))), checkpoint_errors(path):
            raise error
    with pytest.raises(AttributeError), checkpoint_errors(path):
        raise AttributeError("a bug, not a damaged file")


def test_damaged_tokenizer_dicts_are_value_errors():
    for data, message in [
        ([], "expected an object, got list"),
        ({"type": "char", "chars": 5}, "'chars' must be a string"),
        ({"type": "bpe", "merges": [[1]]}, "'merges' must be a list of pairs"),
        ({"type": "bpe", "merges": [[-1, 2]]}, "'merges' must be a list of pairs"),
        ({"type": "bpe", "merges": [], "pattern": "("}, "'pattern' is not a regular expr"),
        ({"type": "wordpiece", "vocab": "abc"}, "'vocab' must be a list of strings"),
    ]:
        with pytest.raises(ValueError, match=message):
            tokenizer_from_dict(data)


# -- pretrained directories ---------------------------------------------------------------------


def test_non_utf8_vocab_and_bad_tokenizer_config_name_the_file(bert_dir, tmp_path, capsys):
    cases = [
        ("vocab.txt", b"[PAD]\n\xff\xfe\n", "vocab.txt is not UTF-8 text"),  # named no file
        ("tokenizer_config.json", b"{not json", "tokenizer_config.json is not valid JSON"),
        ("tokenizer_config.json", b"[1]", "tokenizer_config.json: expected an object"),
        ("tokenizer_config.json", b'{"do_lower_case": "no"}', "do_lower_case must be true"),
    ]
    for i, (name, data, message) in enumerate(cases):
        folder = shutil.copytree(bert_dir, tmp_path / f"case{i}")
        (folder / name).write_bytes(data)
        with pytest.raises(PretrainedError, match=message) as err:
            load_bert(folder)
        assert str(folder / name) in str(err.value)
        assert refused_in_one_line(["embed", "--model", str(folder), "a"], folder / name,
                                    capsys) == 2  # fmt: skip


def test_config_json_larger_than_the_weights_is_refused_before_building(bert_dir, tmp_path):
    folder = shutil.copytree(bert_dir, tmp_path / "huge")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 300000}))
    with pytest.raises(PretrainedError, match=r"config.json describes an encoder of [\d,]+ w"):
        load_bert(folder)
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    with pytest.raises(PretrainedError, match="model.safetensors: load_state_dict into Bert"):
        load_bert(folder)  # was a StateDictError, which the command line did not catch
    (folder / "config.json").write_text(json.dumps({**config, "layer_norm_eps": "small"}))
    with pytest.raises(PretrainedError, match="layer_norm_eps must be a number"):
        load_bert(folder)


def test_malformed_safetensors_headers_are_refused(tmp_path):
    path = tmp_path / "t.safetensors"
    for entry in [
        {"dtype": ["F32"], "shape": [1], "data_offsets": [0, 4]},  # was unhashable: TypeError
        {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [2**32, 2**32], "data_offsets": [0, 0]},  # wrapped to 0
        {"dtype": "F32", "shape": [1], "data_offsets": [0, True]},
        "F32",
    ]:
        text = json.dumps({"w": entry}).encode()
        path.write_bytes(len(text).to_bytes(8, "little") + text + bytes(4))
        with pytest.raises(SafetensorsError, match=re.escape(str(path))):
            load_file(path)
    save_file({"w": np.ones(2, np.float32)}, path)
    assert np.array_equal(load_file(path)["w"], np.ones(2))


# -- tensors and state dicts --------------------------------------------------------------------


def test_tensors_refuse_complex_object_and_text_dtypes_and_keep_ints_and_bools():
    for data in (np.array([1 + 2j]), np.array([None]), np.array(["a"]), np.array([b"a"]), [1j]):
        with pytest.raises(TypeError, match=f"unsupported dtype {np.asarray(data).dtype}"):
            tf.Tensor(data)
    with pytest.raises(TypeError, match="unsupported dtype complex64"):
        tf.Tensor(np.ones(2), dtype=np.complex64)
    assert tf.Tensor(np.array([1, 2])).dtype == np.int64
    assert tf.Tensor(np.array([True])).dtype == np.bool_


def test_load_state_dict_refuses_a_list_and_non_real_arrays():
    layer = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="expected a mapping of names to arrays .* got list"):
        layer.load_state_dict(list(layer.state_dict().values()))
    state = layer.state_dict()
    state["weight"] = state["weight"].numpy().astype(np.complex64)  # Tensors refuse complex
    with pytest.raises(nn.StateDictError, match="weight has dtype complex64, not real numbers"):
        layer.load_state_dict(state)
    state["weight"] = np.array([["a", "b"], ["c", "d"]])
    with pytest.raises(nn.StateDictError, match="weight has dtype <U1"):
        layer.load_state_dict(state)
