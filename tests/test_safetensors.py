"""The NumPy safetensors reader and writer: round trips, the byte layout, bfloat16, and clear
errors on damaged files; (optional) compatibility with the `safetensors` package."""

import json
import struct

import numpy as np
import pytest

import tinyformer as tf
from tinyformer.models import GPT, GPTConfig
from tinyformer.safetensors import SafetensorsError, load_file, read_header, save_file


def _tensors():
    rng = np.random.default_rng(0)
    return {
        "w": rng.standard_normal((3, 4)).astype(np.float32),
        "d": rng.standard_normal(5),
        "h": rng.standard_normal((2, 2)).astype(np.float16),
        "ids": rng.integers(-9, 9, (7,)),
        "small": rng.integers(0, 200, (2, 3), dtype=np.uint8),
        "flag": np.array([True, False, True]),
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 4), np.float32),
    }


def test_round_trip_keeps_names_dtypes_shapes_and_values(tmp_path):
    tensors = _tensors()
    save_file(tensors, tmp_path / "t.safetensors", {"format": "np"})
    back = load_file(tmp_path / "t.safetensors")
    assert back.keys() == tensors.keys()
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape, name
        np.testing.assert_array_equal(back[name], array)
    assert load_file(tmp_path / "t.safetensors", names=["w"]).keys() == {"w"}
    assert read_header(tmp_path / "t.safetensors")[1] == {"format": "np"}


def test_byte_layout_is_the_specification(tmp_path):
    save_file({"b": np.arange(3, dtype=np.float32), "a": np.int64(7)}, tmp_path / "t.st")
    raw = (tmp_path / "t.st").read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0  # the header is space-padded so the data is 8-byte aligned
    header = json.loads(raw[8 : 8 + n])
    assert header["a"] == {"dtype": "I64", "shape": [], "data_offsets": [0, 8]}  # name order
    assert header["b"] == {"dtype": "F32", "shape": [3], "data_offsets": [8, 20]}
    assert raw[8 + n :] == np.int64(7).tobytes() + np.arange(3, dtype="<f4").tobytes()


def _write_raw(path, header, data=b""):
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def test_bfloat16_is_widened_exactly(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3], np.float32)
    words = (values.view(np.uint32) >> 16).astype("<u2")  # bf16 = float32's top 16 bits
    _write_raw(tmp_path / "b.st", {"x": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]}},
               words.tobytes())  # fmt: skip
    x = load_file(tmp_path / "b.st")["x"]
    assert x.dtype == np.float32
    np.testing.assert_array_equal(x, (words.astype(np.uint32) << 16).view(np.float32))
    np.testing.assert_allclose(x, values, rtol=1e-2)


@pytest.mark.parametrize(
    "header, data, message",
    [
        ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4, "claims bytes"),
        ({"x": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8, "needs 12"),
        ({"x": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}, b"\0", "unknown dtype"),
        ({"x": {"dtype": "F32", "shape": [1]}}, b"\0" * 4, "malformed entry"),
        ({"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
          "y": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}, b"\0" * 3, "overlap"),
        ([1, 2], b"", "JSON object"),
    ],
)  # fmt: skip
def test_damaged_files_are_refused_with_the_tensor_named(tmp_path, header, data, message):
    _write_raw(tmp_path / "bad.st", header, data)
    with pytest.raises(SafetensorsError, match=message):
        load_file(tmp_path / "bad.st")


def test_truncated_and_garbage_files(tmp_path):
    (tmp_path / "short").write_bytes(b"\1\2")
    with pytest.raises(SafetensorsError, match="too short"):
        load_file(tmp_path / "short")
    (tmp_path / "huge").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    with pytest.raises(SafetensorsError, match="does not fit"):
        load_file(tmp_path / "huge")
    (tmp_path / "junk").write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{[")
    with pytest.raises(SafetensorsError, match="not valid JSON"):
        load_file(tmp_path / "junk")
    save_file({"x": np.ones(3)}, tmp_path / "ok.st")
    with pytest.raises(SafetensorsError, match=r"no tensor named \['y'\]"):
        load_file(tmp_path / "ok.st", names=["y"])


def test_unsupported_input_writes_nothing(tmp_path):
    with pytest.raises(SafetensorsError, match="'bad' has unsupported dtype"):
        save_file({"ok": np.ones(2), "bad": np.array(["text"])}, tmp_path / "t.st")
    with pytest.raises(SafetensorsError, match="metadata"):
        save_file({"ok": np.ones(2)}, tmp_path / "t.st", {"n": 3})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.hf
def test_files_interchange_with_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    tensors = {k: v for k, v in _tensors().items() if k != "scalar"}
    save_file(tensors, tmp_path / "ours.st", {"who": "tinyformer"})
    theirs = st.load_file(str(tmp_path / "ours.st"))
    st.save_file(tensors, str(tmp_path / "theirs.st"), metadata={"who": "safetensors"})
    ours = load_file(tmp_path / "theirs.st")
    for name, array in tensors.items():
        np.testing.assert_array_equal(theirs[name], array)
        np.testing.assert_array_equal(ours[name], array)
    assert (tmp_path / "ours.st").read_bytes()[8:].startswith(b"{")


def test_a_models_state_dict_round_trips(tmp_path):
    # docs/nn.md's "Saving and loading weights": PyTorch's torch.save(model.state_dict()) here
    config = GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=16)
    tf.manual_seed(0)
    model = GPT(config)
    save_file(model.state_dict(), tmp_path / "model.safetensors")
    tf.manual_seed(1)
    other = GPT(config)
    other.load_state_dict(load_file(tmp_path / "model.safetensors"))
    idx = np.array([[1, 2, 3, 4]])
    np.testing.assert_array_equal(other(idx)[0].data, model(idx)[0].data)
    assert other.lm_head.weight is other.wte.weight  # still tied after loading
