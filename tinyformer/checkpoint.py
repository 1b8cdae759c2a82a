"""Checkpoints as data: one `.npz` file of named arrays plus a JSON document, never pickles.

Layout: every array under its name (`model/h.0.attn.c_attn.weight`, `optim/3/exp_avg`, ...),
and `__meta__`, a 0-d Unicode array holding JSON (configuration, tokenizer, iteration, RNG
states, numbers from the optimizer's state). Reading uses `allow_pickle=False`: a checkpoint file
can never run code. Writing goes to a temporary file in the same folder, flushed to disk, then
renamed over the target, so a crash mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer.fileio import atomic_write

__all__ = ["CheckpointError", "load_checkpoint", "save_checkpoint"]

FORMAT = "tinyformer-checkpoint"
VERSION = 1
META = "__meta__"
ZIP_MAGIC = b"PK\x03\x04"  # a zip archive's first entry (np.savez writes at least one)


class CheckpointError(ValueError):
    """A file that is missing, truncated, corrupt or not a tinyformer checkpoint."""


def save_checkpoint(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Atomically write `arrays` and the JSON-able `meta` to `path`."""
    path = Path(path)
    if META in arrays:
        raise ValueError(f"save_checkpoint: {META!r} is reserved for the metadata")
    document = json.dumps({"format": FORMAT, "version": VERSION, **meta})
    atomic_write(path, lambda f: np.savez(f, **{META: np.array(document)}, **arrays), mode="wb")


def load_checkpoint(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """-> (arrays, meta). Every array is read (and its CRC checked) before returning."""
    path = Path(path)
    if path.is_dir():
        path = path / "ckpt.npz"
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
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as err:
        raise CheckpointError(
            f"{path} is not a readable checkpoint (truncated or corrupt?): "
            f"{type(err).__name__}: {err}"
        ) from None
    if META not in arrays:
        raise CheckpointError(f"{path} is an .npz file but not a tinyformer checkpoint (no {META})")
    try:
        meta = json.loads(str(arrays.pop(META)))
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: its metadata is not valid JSON ({err})") from None
    if meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not a tinyformer checkpoint (format {meta.get('format')!r})"
        )
    if meta.get("version") != VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format version {meta.get('version')}, this tinyformer reads "
            f"version {VERSION}"
        )
    return arrays, meta
