"""Image datasets: scikit-learn's digits (embedded, offline), MNIST and Fashion-MNIST (IDX files,
downloaded once into the cache and checksummed, or read from a folder you give), and a
procedurally generated shapes dataset for segmentation.

Every loader returns float32 images (N, C, H, W) scaled to [0, 1] and int64 labels (N,) (or
per-pixel masks (N, H, W) for segmentation).
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from pathlib import Path

import numpy as np

from tinyformer.data.text import DatasetUnavailable, cache_dir, cached_download

__all__ = ["SHAPE_CLASSES", "load_digits", "load_mnist", "make_shapes", "parse_idx", "write_idx"]

# file -> MD5, as published with the datasets (torchvision lists the same sums)
MNIST_FILES = {
    "mnist": (
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
    ),
    "fashion-mnist": (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
    ),
}

IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 digits: 1,797 images (N, 1, 8, 8) in [0, 1], labels 0-9."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise DatasetUnavailable(
            "the digits dataset ships with scikit-learn: pip install scikit-learn"
        ) from None
    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None]  # pixel values are 0..16
    return images, digits.target.astype(np.int64)


def parse_idx(data: bytes, source: str = "IDX data") -> np.ndarray:
    """An IDX file (LeCun's format: 2 zero bytes, a type byte, a rank byte, one big-endian
    uint32 per dimension, then the values, big-endian) as an array. gzip is undone first.
    `source` (the file's name) begins every error message."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:  # a cut or damaged download
            raise DatasetUnavailable(f"{source}: not a readable gzip file ({err})") from None
    if len(data) < 4 or data[:2] != b"\x00\x00" or data[2] not in IDX_TYPES:
        raise DatasetUnavailable(f"{source}: not an IDX file (bad magic number)")
    rank = data[3]
    if len(data) < 4 + 4 * rank:
        raise DatasetUnavailable(
            f"{source}: {len(data)} bytes, too short for the header of a rank-{rank} IDX file"
        )
    dims = struct.unpack(f">{rank}I", data[4 : 4 + 4 * rank])
    dtype = np.dtype(IDX_TYPES[data[2]])
    expected = 4 + 4 * rank + int(np.prod(dims)) * dtype.itemsize
    if len(data) != expected:
        raise DatasetUnavailable(
            f"{source}: IDX file is {len(data)} bytes, its header says {expected}"
        )
    values = np.frombuffer(data, dtype, offset=4 + 4 * rank).reshape(dims)
    return values.astype(dtype.newbyteorder("="))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> None:
    """Write `array` (uint8) as an IDX file (used by the tests to make small datasets)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    Path(path).write_bytes(header + array.tobytes())


def _fetch(name: str, file: str, root: Path | None) -> bytes:
    base, sums = MNIST_FILES[name]
    for candidate in [root / file, root / file.removesuffix(".gz")] if root else []:
        if candidate.exists():
            return candidate.read_bytes()
    if root is not None:
        raise DatasetUnavailable(f"{root} has no {file} (or its unzipped form)")
    hint = (
        f"Offline? Download the four {name} IDX files elsewhere and pass their folder "
        f"(e.g. `--data-dir path/to/{name}`)."
    )
    path = cached_download(base + file, cache_dir() / name / file, sums[file], "md5", hint)
    return path.read_bytes()


def load_mnist(
    name: str = "mnist", split: str = "train", root: str | os.PathLike | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """MNIST or Fashion-MNIST ("mnist", "fashion-mnist"), split "train" or "test": images
    (N, 1, 28, 28) in [0, 1] and labels. From `root` if given (the IDX files, gzipped or not),
    else from the cache, downloading once."""
    if name not in MNIST_FILES:
        raise DatasetUnavailable(f"unknown dataset {name!r}: choose from {sorted(MNIST_FILES)}")
    prefix = {"train": "train", "test": "t10k"}.get(split)
    if prefix is None:
        raise DatasetUnavailable(f"split must be 'train' or 'test', got {split!r}")
    folder = Path(root) if root is not None else None
    files = f"{prefix}-images-idx3-ubyte.gz", f"{prefix}-labels-idx1-ubyte.gz"
    images, labels = (parse_idx(_fetch(name, file, folder), f"{name} {file}") for file in files)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise DatasetUnavailable(f"{name} {split}: images {images.shape} and labels {labels.shape}")
    return (images / 255.0).astype(np.float32)[:, None], labels.astype(np.int64)


SHAPE_CLASSES = ("background", "circle", "square", "triangle")


def make_shapes(
    n: int, size: int = 32, seed: int = 0, max_shapes: int = 3
) -> tuple[np.ndarray, np.ndarray]:
    """n RGB images (n, 3, size, size) of random circles, squares and triangles on noisy,
    coloured backgrounds, and their per-pixel class masks (n, size, size) (0 = background,
    then SHAPE_CLASSES order; a later shape covers an earlier one). Seeded: the same arguments
    give the same data."""
    if n < 0 or size < 1 or max_shapes < 1:
        raise ValueError(
            f"make_shapes: need n >= 0, size >= 1 and max_shapes >= 1, got n={n}, size={size}, "
            f"max_shapes={max_shapes}"
        )
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] + 0.5
    images = np.empty((n, 3, size, size), np.float32)
    masks = np.zeros((n, size, size), np.int64)
    for k in range(n):
        base = rng.uniform(0.1, 0.5, 3)[:, None, None]
        image = base + 0.08 * rng.standard_normal((3, size, size))
        for _ in range(rng.integers(1, max_shapes + 1)):
            kind = int(rng.integers(1, 4))
            r = rng.uniform(size / 10, size / 4)
            cy, cx = rng.uniform(r, size - r, 2)
            if kind == 1:
                inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
            elif kind == 2:
                inside = (np.abs(yy - cy) <= r * 0.8) & (np.abs(xx - cx) <= r * 0.8)
            else:  # upright triangle: below the apex, above the base, within the slanted sides
                dy = yy - (cy - r)
                inside = (dy >= 0) & (yy <= cy + r * 0.7) & (np.abs(xx - cx) <= dy * 0.6)
            colour = rng.uniform(0.55, 1.0, 3)[:, None]
            image[:, inside] = colour + 0.05 * rng.standard_normal((3, int(inside.sum())))
            masks[k][inside] = kind
        images[k] = image.clip(0, 1)
    return images, masks
