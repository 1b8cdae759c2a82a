"""The notebooks' pytest set-up (tutorials/conftest.py): each notebook's kernel writes its
temporary files to a TMPDIR of its own, and a notebook that leaves any there fails, naming them.

Runs two tiny notebooks with nbmake in a pytest of their own (a Jupyter kernel each).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat comes with the dev extras")
pytest.importorskip("nbmake", reason="nbmake comes with the dev extras")

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path: Path, code: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(code)]
    nbformat.write(nb, str(path))


def test_a_notebook_that_leaves_temporary_files_fails_naming_them(tmp_path):
    shutil.copy(ROOT / "tutorials" / "conftest.py", tmp_path / "conftest.py")
    users_tmp = tmp_path / "users-tmp"
    users_tmp.mkdir()
    write = "import os, tempfile\n"
    _notebook(tmp_path / "tidy.ipynb", write + "with tempfile.TemporaryDirectory() as d:\n  pass\n")
    _notebook(
        tmp_path / "messy.ipynb",
        write + "open(os.path.join(tempfile.gettempdir(), 'left-behind.txt'), 'w').close()\n",
    )
    env = {**os.environ, "TMPDIR": str(users_tmp)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "--nbmake", "-q", "tidy.ipynb", "messy.ipynb"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "messy.ipynb" in out and "left-behind.txt" in out, out
    # The kernel wrote in a folder of its own, removed afterwards, not in the user's TMPDIR.
    assert not any(users_tmp.rglob("left-behind.txt"))
    assert not [p for p in users_tmp.iterdir() if p.name.startswith("notebook-tmp-")]
