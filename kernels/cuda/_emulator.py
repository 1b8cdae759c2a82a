"""Run a CUDA kernel file on the CPU: compile its source with the host's C++ compiler, with
`_emulator.h` standing in for the CUDA runtime, and launch entry points through ctypes.

This is how CI, and any laptop, checks every `.cu` kernel against its NumPy reference: the
fake device's arrays are host memory, so the emulated kernel reads and writes them in place.
It is slow (every CUDA thread a fiber on one OS thread, blocks one after another) and proves nothing
about speed; it proves the indexing, the reductions and the barriers. Compiled libraries are cached
by a hash of everything that went into them, under `tinyformer.data.cache_dir()/cuda-emulator`.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

HEADER = Path(__file__).with_name("_emulator.h")
FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w")


class EmulatorUnavailable(RuntimeError):
    """No C++ compiler to build the emulated kernels with."""


def _compiler() -> str:
    found = os.environ.get("CXX") or shutil.which("g++") or shutil.which("clang++")
    if not found:
        raise EmulatorUnavailable(
            "the CUDA emulator needs a C++20 compiler (g++ or clang++; set CXX to choose one); "
            "install one (Debian: apt-get install g++) or run on a GPU"
        )
    return found


def _launchers(entries: dict[str, Any]) -> str:
    """One C function per entry point: run it on a grid, arguments as cuLaunchKernel takes them."""
    return "".join(
        f'\nextern "C" const char* tf_launch_{name}(const unsigned* dims, void** args) {{\n'
        f"    return tf_emu::launch(dims, [&] {{ tf_emu::call({name}, args); }});\n}}\n"
        for name in entries
    )


def _cache_dir() -> Path:
    from tinyformer.data import cache_dir

    return cache_dir() / "cuda-emulator"


def compile_module(source: str, entries: dict[str, Any], op: str) -> EmulatedModule:
    """Compile `source` (a `.cu` file, includes inlined) for the emulator, or load it cached."""
    compiler = _compiler()
    text = source + _launchers(entries)
    key = hashlib.sha256("\0".join([compiler, *FLAGS, HEADER.read_text(), text]).encode())
    library = _cache_dir() / f"{op}-{key.hexdigest()[:16]}.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        with _build_lock(library):
            if not library.exists():  # another process may have built it while we waited
                _build(compiler, text, op, library)
    return EmulatedModule(ctypes.CDLL(str(library)), entries)


@contextlib.contextmanager
def _build_lock(library: Path) -> Iterator[None]:
    """Hold an exclusive lock for building `library`, so that processes side by side (test
    workers) wait for one build instead of each compiling it. Without fcntl, no lock: the
    atomic rename still keeps the cache whole."""
    if fcntl is None:
        yield
        return
    with open(library.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(compiler: str, text: str, op: str, library: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / f"{op}.cu"
        cu.write_text(text)
        built = Path(tmp) / library.name
        command = [
            compiler,
            *FLAGS,
            "-include",
            str(HEADER),
            "-x",
            "c++",
            str(cu),
            "-o",
            str(built),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{op}.cu does not compile for the CUDA emulator:\n{done.stderr}")
        os.replace(built, library)  # atomic: a concurrent process sees all of it or nothing


class EmulatedModule:
    def __init__(self, library: ctypes.CDLL, entries: dict[str, Any]) -> None:
        self.library = library
        self.entries = entries
        self.launchers = {}  # entry point -> its C launcher, which returns null or what failed
        for name in entries:
            self.launchers[name] = getattr(library, f"tf_launch_{name}")
            self.launchers[name].restype = ctypes.c_char_p

    def launch(self, name: str, dims: Sequence[int], values: Sequence[Any]) -> None:
        """Launch `name` with grid+block `dims` (six ints); `values`: host arrays for pointers,
        NumPy scalars for the rest."""
        cells = [
            ctypes.c_void_p(v.ctypes.data) if isinstance(v, np.ndarray) else np.array(v)
            for v in values
        ]  # each argument in memory of its own, as the pointer array needs
        pointers = (ctypes.c_void_p * max(1, len(cells)))(
            *[
                ctypes.addressof(c) if isinstance(c, ctypes.c_void_p) else c.ctypes.data
                for c in cells
            ]
        )
        grid = (ctypes.c_uint * 6)(*dims)
        failed = self.launchers[name](grid, pointers)
        if failed:
            raise RuntimeError(f"{name}: {failed.decode()}")
