"""Checkpoints as data: one `.npz` file of named arrays plus a JSON document, never pickles.

Layout: every array under its name (`model/h.0.attn.c_attn.weight`, `optim/3/exp_avg`, ...),
and `__meta__`, a 0-d Unicode array holding JSON (configuration, tokenizer, iteration, RNG
states, numbers from the optimizer's state). Reading uses `allow_pickle=False`: a checkpoint file
can never run code. Writing goes to a temporary file in the same folder, flushed to disk, then
renamed over the target, so a crash mid-write leaves the previous checkpoint intact.

The metadata also holds a manifest: every array's name, shape, dtype and CRC-32. The zip's own
CRCs check each entry it lists, but a damaged index can list fewer entries, or rename one, and
the file then still opens, with arrays missing; reading checks the arrays against the manifest.
Files written before the manifest existed (same format version) are read without the check.
"""

from __future__ import annotations

import json
import os
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer import backend
from tinyformer.fileio import atomic_write
from tinyformer.tensor import Tensor

__all__ = [
    "CheckpointError", "checkpoint_path", "load_checkpoint", "non_finite", "save_checkpoint",
]  # fmt: skip

FORMAT = "tinyformer-checkpoint"
VERSION = 1
META = "__meta__"
MANIFEST = "manifest"
NUMBERS = "biuf"  # the dtype kinds a checkpoint holds: bool, int, unsigned, float
ZIP_MAGIC = b"PK\x03\x04"  # a zip archive's first entry (np.savez writes at least one)


class CheckpointError(ValueError):
    """A file that is missing, truncated, corrupt or not a tinyformer checkpoint."""


# What NumPy's and zipfile's readers raise on a damaged archive: a bad CRC or header
# (BadZipFile, ValueError), a cut file (EOFError, struct.error), a flipped compression method
# (NotImplementedError), bad deflate data (zlib.error), a mangled name (UnicodeDecodeError).
_DAMAGE = (
    zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, NotImplementedError,
    OverflowError, struct.error, zlib.error,
)  # fmt: skip


def save_checkpoint(path: str | os.PathLike, arrays: dict[str, Any], meta: dict) -> None:
    """Atomically write `arrays` (host or device arrays, or Tensors: each is written as it is
    now) and the JSON-able `meta` to `path`."""
    path = Path(path)
    if META in arrays or MANIFEST in meta:
        raise ValueError(f"save_checkpoint: {META!r} and {MANIFEST!r} are the file's own names")
    arrays = {name: backend.to_host(_array(a)) for name, a in arrays.items()}
    for name, array in arrays.items():
        if array.dtype.kind not in NUMBERS:  # objects would be pickled, which reading refuses
            raise ValueError(
                f"save_checkpoint: array {name!r} has dtype {array.dtype}, not numbers"
            )
    manifest = {name: _entry(array) for name, array in arrays.items()}
    document = json.dumps({"format": FORMAT, "version": VERSION, **meta, MANIFEST: manifest})
    atomic_write(path, lambda f: np.savez(f, **{META: np.array(document)}, **arrays), mode="wb")


def _array(value: Any) -> Any:
    return value.data if isinstance(value, Tensor) else value


def _entry(array: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(array).reshape(-1)  # crc32 needs one contiguous buffer
    return {"shape": list(array.shape), "dtype": array.dtype.str, "crc32": zlib.crc32(data)}


def checkpoint_path(path: str | os.PathLike) -> Path:
    """The file a checkpoint path means: a run folder stands for its `ckpt.npz`."""
    path = Path(path)
    return path / "ckpt.npz" if path.is_dir() else path


def load_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """-> (arrays, meta). Every array is read (and its CRC checked) before returning."""
    path = checkpoint_path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    # np.load reads by the first bytes: a .npy file would come back as one array, and anything
    # else that is not a zip archive falls through to its pickle check, whose message suggests
    # loading the file unsafely. Neither is what a user who passed the wrong file needs to see.
    with open(path, "rb") as f:
        head = f.read(4)
    if head != ZIP_MAGIC:
        raise CheckpointError(
            f"{path} is not a tinyformer checkpoint: checkpoints are .npz (zip) archives, which "
            f"start with {ZIP_MAGIC!r}; this file starts with {head!r}"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except MemoryError:  # a damaged .npy header can claim any shape
        raise CheckpointError(f"{path} is damaged: an array in it claims more memory than "
                              "there is") from None  # fmt: skip
    except _DAMAGE as err:
        raise CheckpointError(
            f"{path} is not a readable checkpoint (truncated or corrupt?): "
            f"{type(err).__name__}: {err}"
        ) from None
    if META not in arrays:
        raise CheckpointError(f"{path} is an .npz file but not a tinyformer checkpoint (no {META})")
    document = arrays.pop(META)
    if document.shape != () or document.dtype.kind != "U":
        raise CheckpointError(f"{path}: its {META} is not a JSON text")
    try:
        meta = json.loads(str(document))
    except (json.JSONDecodeError, RecursionError) as err:
        raise CheckpointError(f"{path}: its metadata is not valid JSON ({err})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: its metadata is not a JSON object")
    if meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not a tinyformer checkpoint (format {meta.get('format')!r})"
        )
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {meta.get('version')}, this tinyformer reads "
            f"version {VERSION}"
        )
    if MANIFEST in meta:
        _check_manifest(path, arrays, meta.pop(MANIFEST))
    for name, array in arrays.items():
        if array.dtype.kind not in NUMBERS:  # e.g. strings, which np.savez writes as data
            raise CheckpointError(f"{path}: array {name!r} has dtype {array.dtype}, not a number")
    return arrays, meta


def _check_manifest(path: Path, arrays: dict[str, np.ndarray], manifest: Any) -> None:
    """CheckpointError naming the first array the manifest lists that is missing, extra or
    different from what was saved."""
    if not isinstance(manifest, dict) or not all(
        isinstance(e, dict) and {"shape", "dtype", "crc32"} <= set(e) for e in manifest.values()
    ):
        raise CheckpointError(f"{path}: its manifest of arrays is malformed")
    missing = sorted(set(manifest) - set(arrays))
    if missing:
        raise CheckpointError(
            f"{path} is damaged: array {missing[0]!r} is missing ({len(missing)} of "
            f"{len(manifest)} arrays are; the zip index may be corrupt)"
        )
    extra = sorted(set(arrays) - set(manifest))
    if extra:
        raise CheckpointError(f"{path} is damaged: array {extra[0]!r} was not saved in it")
    for name, array in arrays.items():
        saved, found = manifest[name], _entry(array)
        for what in ("shape", "dtype", "crc32"):
            if found[what] != saved[what]:
                raise CheckpointError(
                    f"{path} is damaged: array {name!r} has {what} {found[what]}, "
                    f"saved with {saved[what]}"
                )


def non_finite(arrays: dict[str, Any]) -> str | None:
    """None if every float array in `arrays` is finite; else which ones are not, in words. A
    model with a NaN or infinite weight computes NaN everywhere and says nothing: text sampled
    from it is garbage, embeddings are NaN. (A training run stops before a step that would
    make a weight non-finite, so a file holding one was damaged, edited, or written elsewhere.)"""
    bad = [
        name
        for name, array in arrays.items()
        if np.asarray(array).dtype.kind in "fc" and not np.isfinite(array).all()
    ]
    if not bad:
        return None
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"the weights {', '.join(bad[:3])}{more} hold NaN or infinite values"
