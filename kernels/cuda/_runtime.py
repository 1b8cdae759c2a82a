"""How a CUDA kernel file runs: read its `.cu` source from the package, compile it once per
process, launch its entry points with arguments cast to the types their signatures declare.

    module = runtime.load("softmax")          # softmax.cu, with its #include "common.cuh" inlined
    module.launch("softmax_forward_f32", grid=rows, block=256, args=(x, y, rows, cols))

Where it runs is decided by the arrays: CuPy arrays launch on the GPU through CuPy's `RawModule`
(NVRTC, cached on disk by CuPy); arrays of the fake device run the same source on the CPU through
the emulator (`_emulator.py`), which is how CI checks every kernel without a GPU. Each entry point
is an `extern "C"` function, one per dtype: CuPy caches those on disk, where templates reached
through `name_expressions` would be recompiled in every process.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tinyformer import backend, launches

HERE = Path(__file__).parent
OPTIONS = ("-std=c++17",)
# Scalar parameter types -> the NumPy type an argument is cast to (pointers take arrays).
SCALARS = {
    "int": np.int32,
    "unsigned": np.uint32,
    "unsigned int": np.uint32,
    "long long": np.int64,
    "int64_t": np.int64,
    "unsigned long long": np.uint64,
    "uint64_t": np.uint64,
    "float": np.float32,
    "double": np.float64,
}
_ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
_INCLUDE = re.compile(r'^#include\s+"([\w.]+)"\s*$', re.M)


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # a key of SCALARS, or "pointer"


@dataclass(frozen=True)
class Entry:
    name: str
    params: tuple[Param, ...]


def source(op: str) -> str:
    """`<op>.cu` with each `#include "x.cuh"` of this folder replaced by the file's text, and
    `#line` marks so that compile errors still name the right file and line. Inlined rather than
    found through -I, because CuPy's disk cache keys on the source text and would otherwise
    miss an edit to a header."""
    path = HERE / f"{op}.cu"
    if not path.is_file():
        raise FileNotFoundError(f"no CUDA source {path.name} in {HERE}")
    return _expand(path.read_text(), path.name)


def _expand(text: str, name: str) -> str:
    parts, last = [f'#line 1 "{name}"\n'], 0
    for match in _INCLUDE.finditer(text):
        header = HERE / match.group(1)
        line = text.count("\n", 0, match.end()) + 1  # the line after the #include
        parts += [text[last : match.start()], _expand(header.read_text(), header.name), "\n"]
        parts.append(f'#line {line + 1} "{name}"')
        last = match.end()
    parts.append(text[last:])
    return "".join(parts)


def entries(src: str) -> dict[str, Entry]:
    """The `extern "C" __global__` entry points of a source, with their parameters."""
    found = {}
    for name, params in _ENTRY.findall(src):
        parsed = []
        for declaration in filter(None, (p.strip() for p in params.split(","))):
            words = declaration.replace("*", " * ").split()
            kind = " ".join(w for w in words[:-1] if w not in ("const", "__restrict__"))
            if "*" in words:
                kind = "pointer"
            elif kind not in SCALARS:
                raise TypeError(
                    f"{name}: parameter {declaration!r} has a type the launcher cannot pass; "
                    f"use a pointer or one of {sorted(SCALARS)}"
                )
            parsed.append(Param(words[-1], kind))
        found[name] = Entry(name, tuple(parsed))
    return found


def _dims(value: int | Sequence[int]) -> tuple[int, int, int]:
    dims = (value,) if isinstance(value, int) else tuple(value)
    if not 1 <= len(dims) <= 3 or any(int(d) < 1 for d in dims):
        raise ValueError(f"launch dimensions must be 1 to 3 positive integers, got {value!r}")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


class Module:
    """CUDA C source (a `.cu` file's, or any string): its entry points, compiled for the GPU
    or for the emulator on first use. `load(op)` makes one per kernel file."""

    def __init__(self, op: str, text: str) -> None:
        self.op = op
        self.source = text
        self.entries = entries(text)
        self._gpu: Any = None
        self._cpu: Any = None
        self._functions: dict[str, Any] = {}  # CuPy's get_function costs microseconds a call

    def launch(self, name: str, grid: Any, block: Any, args: Sequence[Any]) -> None:
        """Launch entry point `name` on `grid` blocks of `block` threads (ints or 1-3 tuples)."""
        entry = self.entries.get(name)
        if entry is None:
            raise KeyError(
                f"{self.op}.cu has no entry point {name!r}; it has {sorted(self.entries)}"
            )
        if len(args) != len(entry.params):
            raise TypeError(f"{name} takes {len(entry.params)} arguments, got {len(args)}")
        arrays = [a for a, p in zip(args, entry.params) if p.type == "pointer"]
        for a, p in zip(args, entry.params):
            if p.type == "pointer" and not a.flags.c_contiguous:
                raise ValueError(f"{name}: argument {p.name} must be C-contiguous")
        grid3, block3 = _dims(grid), _dims(block)
        if launches.active:
            launches.record("kernel")
        if any(backend.is_emulated(a) for a in arrays):
            self._emulated(entry, grid3, block3, args)
        else:
            self._on_gpu(entry, grid3, block3, args)

    def _on_gpu(self, entry: Entry, grid: tuple, block: tuple, args: Sequence[Any]) -> None:
        if self._gpu is None:
            import cupy

            self._gpu = cupy.RawModule(code=self.source, options=OPTIONS)
        cast = [
            a if p.type == "pointer" else SCALARS[p.type](a) for a, p in zip(args, entry.params)
        ]
        function = self._functions.get(entry.name)
        if function is None:
            function = self._functions[entry.name] = self._gpu.get_function(entry.name)
        function(grid, block, tuple(cast))

    def _emulated(self, entry: Entry, grid: tuple, block: tuple, args: Sequence[Any]) -> None:
        from tinyformer.kernels.cuda import _emulator

        if self._cpu is None:
            self._cpu = _emulator.compile_module(self.source, self.entries, self.op)
        pointers = [a for a, p in zip(args, entry.params) if p.type == "pointer"]
        if not all(backend.is_emulated(a) for a in pointers):  # as CuPy refuses host memory
            raise TypeError(f"{self.op}.{entry.name}: every array must be on the fake device")
        values = [
            backend.host_memory(a) if p.type == "pointer" else SCALARS[p.type](a)
            for a, p in zip(args, entry.params)
        ]
        self._cpu.launch(entry.name, grid + block, values)


@functools.cache
def load(op: str) -> Module:
    """The module compiled from `<op>.cu` (read once per process)."""
    return Module(op, source(op))


def address(a: Any) -> int:
    """The device address of a's first element, as an int: what a kernel's table of pointers
    holds. CuPy's `a.data.ptr`; on the fake device, the host memory its emulated kernels read."""
    if backend.is_emulated(a):
        return backend.host_memory(a).ctypes.data
    return a.data.ptr


def blocks(n: int, per_block: int) -> int:
    """How many blocks of `per_block` threads cover n items (at least one)."""
    return max(1, -(-n // per_block))
