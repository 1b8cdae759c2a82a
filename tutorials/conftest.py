"""How the notebooks run under pytest (nbmake): `make notebooks`, and `make test`, which runs them
in one session with the unit tests.

Each notebook's kernel gets a TMPDIR of its own, which must be empty when the notebook finishes: a
notebook that leaves its runs behind would fill the user's /tmp a little more every time it is
run. The rest of the kernel's environment (test sizes, headless matplotlib) comes from the
Makefile.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not getattr(item, "nbmake", False):  # nbmake's items say what they are
        return (yield)
    folder = tempfile.mkdtemp(prefix="notebook-tmp-")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = folder  # the kernel starts inside the call, with this environment
    try:
        outcome = yield
    finally:
        if before is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = before
        left = sorted(os.listdir(folder))
        shutil.rmtree(folder, ignore_errors=True)
    if left:
        raise AssertionError(
            f"{item.nodeid} left files in its TMPDIR, which it must remove before it ends: "
            + ", ".join(left)
        )
    return outcome
