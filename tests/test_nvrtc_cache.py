"""NVRTC's compiles are kept on disk: the same source, name, architecture and options again is a
file read; anything else that changes is a new compile; a failure is never kept."""

from __future__ import annotations

import os

import pytest

from tinyformer.kernels.cuda import _nvrtc

SOURCE = 'extern "C" __global__ void one(float* x) { x[0] = 1.0f; }\n'


@pytest.fixture
def cache(tmp_path, monkeypatch):
    try:
        _nvrtc.library()
    except _nvrtc.NvrtcUnavailable as e:
        if os.environ.get("CI"):  # CI installs it: a silent skip there would hide a broken install
            raise
        pytest.skip(str(e))
    monkeypatch.setenv("TINYFORMER_CACHE", str(tmp_path))
    return tmp_path / "nvrtc"


def test_a_compile_is_kept_and_read_back(cache):
    cubin, log = _nvrtc.compile_with_log(SOURCE, "one.cu", arch="sm_80")
    (kept,) = cache.glob("one-sm_80-*.cubin")
    assert kept.read_bytes() == cubin and kept.with_suffix(".log").read_text() == log
    kept.write_bytes(b"kept")  # what comes back now is the file, not a new compile
    assert _nvrtc.compile_cuda(SOURCE, "one.cu", arch="sm_80") == b"kept"
    assert not list(cache.glob(".*"))  # no temporary files left behind


def test_another_source_or_architecture_compiles_again(cache):
    _nvrtc.compile_cuda(SOURCE, "one.cu", arch="sm_80")
    _nvrtc.compile_cuda(SOURCE, "one.cu", arch="sm_90")
    _nvrtc.compile_cuda(SOURCE.replace("1.0f", "2.0f"), "one.cu", arch="sm_80")
    assert len(list(cache.glob("*.cubin"))) == 3


def test_a_failed_compile_is_not_kept(cache):
    with pytest.raises(_nvrtc.CompileError, match="broken.cu"):
        _nvrtc.compile_cuda("this is not CUDA", "broken.cu", arch="sm_80")
    assert not cache.exists() or not list(cache.iterdir())
