"""Image datasets: digits (embedded), IDX parsing on files the test writes, MNIST from a local
folder and its offline message, and the generated shapes dataset."""

from __future__ import annotations

import gzip
import urllib.error

import numpy as np
import pytest

from tinyformer.data import DatasetUnavailable
from tinyformer.data import text as text_module
from tinyformer.data.images import load_digits, load_mnist, make_shapes, parse_idx, write_idx


def test_digits_are_embedded():
    images, labels = load_digits()
    assert images.shape == (1797, 1, 8, 8) and images.dtype == np.float32
    assert 0.0 <= images.min() and images.max() <= 1.0 and set(labels) == set(range(10))


def test_idx_round_trip_plain_and_gzipped(tmp_path):
    array = np.random.default_rng(0).integers(0, 256, (5, 7, 3)).astype(np.uint8)
    write_idx(tmp_path / "a.idx", array)
    raw = (tmp_path / "a.idx").read_bytes()
    assert raw[:4] == bytes([0, 0, 8, 3])
    np.testing.assert_array_equal(parse_idx(raw), array)
    np.testing.assert_array_equal(parse_idx(gzip.compress(raw)), array)
    with pytest.raises(DatasetUnavailable, match="magic"):
        parse_idx(b"\x01\x02\x08\x01" + raw[4:])
    with pytest.raises(DatasetUnavailable, match="header says"):
        parse_idx(raw[:-5])
    # a header cut short, a damaged gzip stream: the file is named, no struct or zlib error
    with pytest.raises(DatasetUnavailable, match="^labels: 9 bytes, too short .* rank-3 IDX"):
        parse_idx(raw[:9], "labels")
    zipped = gzip.compress(raw)
    flipped = zipped[:12] + bytes([zipped[12] ^ 0xFF]) + zipped[13:]  # bad deflate data
    for damaged in (zipped[:-12], flipped):
        with pytest.raises(DatasetUnavailable, match="^images: not a readable gzip file"):
            parse_idx(damaged, "images")


def _fake_mnist(folder, n=6):
    rng = np.random.default_rng(1)
    for prefix in ("train", "t10k"):
        write_idx(folder / f"{prefix}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        labels = rng.integers(0, 10, n)
        (folder / f"{prefix}-labels-idx1-ubyte.gz").write_bytes(
            gzip.compress(
                bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + labels.astype(np.uint8).tobytes()
            )
        )


def test_mnist_from_a_local_folder(tmp_path):
    _fake_mnist(tmp_path)
    images, labels = load_mnist("fashion-mnist", "test", root=tmp_path)
    assert images.shape == (6, 1, 28, 28) and labels.shape == (6,)
    assert images.max() <= 1.0 and labels.dtype == np.int64
    with pytest.raises(DatasetUnavailable, match="unknown dataset"):
        load_mnist("cifar", root=tmp_path)


def test_mnist_offline_says_how_to_use_local_files(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYFORMER_CACHE", str(tmp_path))

    def offline(*args, **kwargs):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(text_module.urllib.request, "urlopen", offline)  # downloads live there
    with pytest.raises(DatasetUnavailable, match="--data-dir"):
        load_mnist("mnist")


def test_shapes_dataset_is_seeded_and_labelled():
    images, masks = make_shapes(20, size=24, seed=3)
    again, masks2 = make_shapes(20, size=24, seed=3)
    assert images.shape == (20, 3, 24, 24) and masks.shape == (20, 24, 24)
    assert np.array_equal(images, again) and np.array_equal(masks, masks2)
    assert set(np.unique(masks)) == {0, 1, 2, 3}
    # shapes are brighter than the background they sit on
    bright = images.mean(axis=1)
    assert bright[masks > 0].mean() > bright[masks == 0].mean() + 0.2
    for bad in ({"n": -1}, {"size": 0}, {"max_shapes": 0}):
        with pytest.raises(ValueError, match="make_shapes: need n >= 0, size >= 1"):
            make_shapes(**{"n": 2, "size": 8, **bad})
