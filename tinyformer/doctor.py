"""`tinyformer doctor`: what this Python runs tinyformer with, one line per check.

Each line is `OK` or `WARN`, with a hint on what to do about a warning. It changes nothing but
what the first op of any process does (`runtime.apply_settings`), and always exits 0: it is for
reading (and for pasting into a question to the course staff).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

__all__ = ["checks", "run"]

Check = tuple[bool, str, str]  # (ok, what, hint if not ok)


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _tinyformer() -> list[Check]:
    import tinyformer

    folder = Path(tinyformer.__file__).resolve().parent
    what = f"tinyformer {tinyformer.__version__} imported from {folder}"
    try:
        url = json.loads(importlib.metadata.distribution("tinyformer").read_text("direct_url.json"))
    except (importlib.metadata.PackageNotFoundError, TypeError, ValueError):
        url = {}
    editable = url.get("dir_info", {}).get("editable", False)
    source = Path(url.get("url", "file://").removeprefix("file://")).resolve()
    if editable:
        here = "this folder" if source == Path.cwd().resolve() else str(source)
        what += f" (editable install of {here})"
    checks = [(True, what, "")]
    if importlib.util.find_spec("tinyformer.kernels") is None:
        checks.append((False, "the kernels (tinyformer.kernels) are not importable: every op runs "
                       "its NumPy reference", "install with `pip install -e .` from the repository "
                       "root"))  # fmt: skip
    elif not editable and folder.parent == Path.cwd().resolve():
        checks.append((False, "a plain install, run from the source tree: Python imports the "
                       "source folder, not the installed package", "develop with `pip install "
                       "-e .`"))  # fmt: skip
    return checks


def _threads() -> list[Check]:
    from tinyformer import registry, runtime

    try:
        registry.primitives()  # the first dispatch: applies the settings and loads the kernels
    except ValueError as err:  # a bad TINYFORMER_BACKEND or TINYFORMER_THREADS
        return [(False, str(err), "fix or unset the variable: every op raises this error")]
    if "numba" in sys.modules:
        sys.modules["numba"].get_num_threads()  # loads Numba's threading layer, as a kernel would
    now = runtime.settings()
    applied = runtime.apply_settings()
    checks: list[Check] = []
    blas = now.get("blas", "threadpoolctl is not installed")
    one = all(part.endswith(" on 1") for part in blas.split(", "))
    checks.append((one, f"BLAS: {blas} ({applied['blas']})",
                   "linear's Numba kernel runs only with BLAS on one thread: unset your BLAS "
                   f"thread variable or {runtime.THREADS_VAR}"))  # fmt: skip
    numba_line = now.get("numba")
    if numba_line is None:
        checks.append((False, "numba is not installed: every op runs its NumPy reference",
                       "pip install numba"))  # fmt: skip
    else:
        checks.append((True, f"numba {numba_line} ({applied['numba layer']})", ""))
    spin = applied["openmp spin"]
    checks.append((not spin.startswith("libgomp's default"), f"OpenMP workers: {spin}",
                   "run a tinyformer op before Numba's own parallel code, or set "
                   f"GOMP_SPINCOUNT={runtime.SPIN} before Python starts"))  # fmt: skip
    checks.append((applied["malloc"] != "mallopt refused", f"malloc: {applied['malloc']}", ""))
    return checks


def _tools() -> list[Check]:
    checks: list[Check] = []
    for name, why in (("jupytext", "opens the tutorials and assignments (.py) as notebooks"),
                      ("ipykernel", "runs them in Jupyter")):  # fmt: skip
        version = _installed(name)
        what = f"{name} {version}" if version else f"{name} is not installed ({why})"
        checks.append((version is not None, what, f"pip install {name}"))
    lab = _installed("jupyterlab") or _installed("notebook")
    checks.append((lab is not None, f"Jupyter {'found' if lab else 'not found'}",
                   "pip install jupyterlab (or use VS Code's notebooks)"))  # fmt: skip
    return checks


def _gpu() -> list[Check]:
    from tinyformer import backend

    if importlib.util.find_spec("cupy") is None:
        return [(True, "no CuPy: CPU only (the CUDA kernels run on the CPU emulator in tests)", "")]
    if backend.cuda_available():
        return [(True, f"CuPy {_installed('cupy') or ''} sees {backend._probe_cuda().count} GPU(s)",
                 "")]  # fmt: skip
    why = backend._probe_cuda().why_not
    return [(False, f"CuPy is installed but no GPU can be used: {why}",
             "on a machine without a GPU, uninstall CuPy or ignore this")]  # fmt: skip


def checks() -> list[Check]:
    """Every check, in the order `run` prints them."""
    head = (True, f"Python {platform.python_version()} at {sys.executable}", "")
    backend_var = os.environ.get("TINYFORMER_BACKEND")
    env = [(True, f"TINYFORMER_BACKEND={backend_var}", "")] if backend_var else []
    return [head, *_tinyformer(), *env, *_threads(), *_tools(), *_gpu()]


def run() -> int:
    """Print every check as an OK or WARN line; always 0."""
    for ok, what, hint in checks():
        print(
            f"{'OK  ' if ok else 'WARN'}  {what}" + ("" if ok or not hint else f"  [hint: {hint}]")
        )
    return 0
