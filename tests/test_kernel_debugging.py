"""The debugging workflow docs/kernels.md promises: with NUMBA_DISABLE_JIT=1 every kernel runs as
plain Python (breakpoints, prints) and still equals its reference.

Kernels that use LLVM intrinsics (the integer row max, the fast exp's power of two) reach them
through a plain-Python stand-in with a Numba overload; without it, the first softmax or attention
call raised "not usable in pure-python". Dropout's hash wraps uint64 products on purpose, so its
wrapper turns NumPy's overflow warnings off (the test config makes warnings errors)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_every_kernel_matches_its_reference_as_plain_python():
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1"}  # read when numba is imported: a new process
    tests = Path(__file__).parent
    command = [
        *(sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *(str(tests / "test_ops_generic.py"), "-k", "test_backend_matches_reference and numba"),
    ]
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tests.parent)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
