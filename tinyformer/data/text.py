"""Text corpora: the embedded default, Tiny Shakespeare by name (downloaded once, checksummed,
cached), or any local file.

The default needs no network: the English documentation that ships with CPython as
`pydoc_data.topics` (about 465k characters of prose and code; the exact text differs a little
between Python versions).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from pathlib import Path

from tinyformer.fileio import atomic_write

__all__ = [
    "CORPORA",
    "DatasetUnavailable",
    "cache_dir",
    "load_text",
    "pydoc_topics",
    "tinyshakespeare",
]

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINYSHAKESPEARE_BYTES = 1_115_394


class DatasetUnavailable(RuntimeError):
    """A dataset could not be read or downloaded; the message says what to do instead."""


def cache_dir() -> Path:
    """$TINYFORMER_CACHE, else $XDG_CACHE_HOME/tinyformer, else ~/.cache/tinyformer."""
    if os.environ.get("TINYFORMER_CACHE"):
        return Path(os.environ["TINYFORMER_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tinyformer"


def pydoc_topics() -> str:
    """CPython's bundled documentation topics, joined in a fixed order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def download(
    url: str, path: Path, checksum: str, algorithm: str = "sha256", timeout: float = 30.0
) -> Path:
    """Fetch `url` to `path`; the file appears only once its checksum (`algorithm`: "sha256",
    or "md5" where only that is published) matches (written to a temporary file, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            data = response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        raise DatasetUnavailable(
            f"could not download {url} ({err}). If this machine is offline, download the file "
            f"elsewhere and pass its path, or put it at {path} ({algorithm} {checksum})."
        ) from None
    got = hashlib.new(algorithm, data).hexdigest()
    if got != checksum:
        raise DatasetUnavailable(
            f"{url} gave {len(data):,} bytes with {algorithm} {got}, expected {checksum}; "
            "nothing was saved. Pass a trusted local copy instead."
        )
    atomic_write(path, lambda f: f.write(data), mode="wb")
    return path


def cached_download(
    url: str, path: Path, checksum: str, algorithm: str = "sha256", hint: str = ""
) -> Path:
    """The verified file at `path`, downloaded once. A cached copy with the wrong checksum is an
    error (delete it to download again); a failed download adds `hint` (how to go offline)."""
    if path.exists():
        if hashlib.new(algorithm, path.read_bytes()).hexdigest() != checksum:
            raise DatasetUnavailable(
                f"{path} exists but its {algorithm} is not {checksum}: delete it to download "
                "again, or pass a local copy"
            )
        return path
    try:
        return download(url, path, checksum, algorithm)
    except DatasetUnavailable as err:
        raise DatasetUnavailable(f"{err} {hint}") from None


def tinyshakespeare() -> str:
    """Tiny Shakespeare (Karpathy's char-rnn), from the cache or downloaded once into it."""
    hint = (
        f"Tiny Shakespeare is {TINYSHAKESPEARE_BYTES:,} bytes; pass a local copy with "
        "`--data path/to/input.txt`."
    )
    path = cached_download(
        TINYSHAKESPEARE_URL, cache_dir() / "tinyshakespeare.txt", TINYSHAKESPEARE_SHA256, hint=hint
    )
    return path.read_text(encoding="utf-8")


CORPORA = {"pydoc": pydoc_topics, "tinyshakespeare": tinyshakespeare}


def load_text(source: str = "pydoc") -> str:
    """A corpus by name ("pydoc", the default, or "tinyshakespeare") or a path to a UTF-8 file."""
    if source in CORPORA:
        return CORPORA[source]()
    path = Path(source).expanduser()
    if path.is_dir():
        raise DatasetUnavailable(f"{source} is a folder: give a text file, or a corpus name "
                                 f"({', '.join(sorted(CORPORA))})")  # fmt: skip
    if not path.is_file():
        raise DatasetUnavailable(f"no text file {source} (nor a corpus of that name: "
                                 f"{', '.join(sorted(CORPORA))})")  # fmt: skip
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DatasetUnavailable(f"{path} is not UTF-8 text ({err})") from None
    if not text:
        raise DatasetUnavailable(f"{path} is empty")
    return text
