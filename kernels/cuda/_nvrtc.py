"""Compile CUDA C to a GPU binary with NVRTC, on any machine: no GPU and no driver needed.

NVIDIA's runtime compiler ships on PyPI (`pip install "nvidia-cuda-nvrtc==13.*"`, a dev
dependency of tinyformer). Given an explicit architecture it compiles straight to a cubin, the
machine code a GPU of that generation runs, so a typo in a kernel fails CI, not a GPU session:

    from tinyformer.kernels.cuda import _nvrtc
    cubin = _nvrtc.compile_cuda(source, "softmax.cu", arch="sm_90")   # bytes, or CompileError

CuPy compiles through the same library on a GPU machine; this module calls it directly with
ctypes, so the check needs nothing else.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

ARCHITECTURES = ("sm_80", "sm_90")  # A100, H100/H200


class NvrtcUnavailable(RuntimeError):
    """libnvrtc cannot be found."""


class CompileError(RuntimeError):
    """NVRTC rejected a source; the message is its log (file, line, error)."""


def _library_path() -> str:
    candidates = []
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        candidates += sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so*")))
    candidates = [c for c in candidates if "builtins" not in c]
    if os.environ.get("CUDA_HOME"):
        candidates += sorted(
            glob.glob(os.path.join(os.environ["CUDA_HOME"], "lib64", "libnvrtc.so*"))
        )
    if not candidates:
        raise NvrtcUnavailable(
            'NVRTC is not installed: pip install "nvidia-cuda-nvrtc==13.*" (no GPU needed)'
        )
    return candidates[-1]


_lib: list[ctypes.CDLL] = []


def library() -> ctypes.CDLL:
    if not _lib:
        _lib.append(ctypes.CDLL(_library_path()))
    return _lib[0]


def version() -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def _check(result: int, what: str) -> None:
    if result != 0:
        lib = library()
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise CompileError(f"{what}: {lib.nvrtcGetErrorString(result).decode()}")


def compile_cuda(
    source: str, name: str, arch: str = "sm_90", options: Sequence[str] = ("-std=c++17",)
) -> bytes:
    """The cubin NVRTC makes of `source` for `arch` ("sm_80", "sm_90", ...); CompileError with
    NVRTC's log (naming `name` and the line) when it does not compile."""
    return compile_with_log(source, name, arch, options)[0]


def compile_with_log(
    source: str, name: str, arch: str = "sm_90", options: Sequence[str] = ("-std=c++17",)
) -> tuple[bytes, str]:
    """compile_cuda's cubin and NVRTC's log of a successful compile: with "-Xptxas=-v" among
    the options, each kernel's registers and shared memory.

    A successful compile is kept on disk, under `tinyformer.data.cache_dir()/nvrtc`, keyed by a
    hash of the NVRTC library and version, `arch`, `options`, `name` and `source`: the same
    compile again is a file read. Failures are not kept."""
    key = "\0".join([_library_path(), *map(str, version()), arch, *options, name, source])
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    cached = _cache_dir() / f"{Path(name).stem}-{arch}-{digest}"
    cubin_path, log_path = cached.with_suffix(".cubin"), cached.with_suffix(".log")
    if cubin_path.exists():  # written after its log
        return cubin_path.read_bytes(), log_path.read_text(encoding="utf-8")
    cubin, log = _compile(source, name, arch, options)
    _write_atomic(log_path, log.encode())
    _write_atomic(cubin_path, cubin)
    return cubin, log


def _cache_dir() -> Path:
    from tinyformer.data import cache_dir

    return cache_dir() / "nvrtc"


def _write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a process reading it side by side sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _compile(source: str, name: str, arch: str, options: Sequence[str]) -> tuple[bytes, str]:
    lib = library()
    program = ctypes.c_void_p()
    _check(
        lib.nvrtcCreateProgram(
            ctypes.byref(program), source.encode(), name.encode(), 0, None, None
        ),
        f"{name}: nvrtcCreateProgram",
    )
    try:
        flags = [f"--gpu-architecture={arch}", *options]
        argv = (ctypes.c_char_p * len(flags))(*[f.encode() for f in flags])
        result = lib.nvrtcCompileProgram(program, len(flags), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        if result != 0:
            raise CompileError(f"{name} does not compile for {arch}:\n{log.value.decode()}")
        lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(program, cubin), f"{name}: nvrtcGetCUBIN")
        return cubin.raw, log.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))


def sources() -> list[Path]:
    """Every kernel source of the package (the `.cu` files; headers compile as their part)."""
    return sorted(Path(__file__).parent.glob("*.cu"))
