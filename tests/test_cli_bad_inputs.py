"""Bad input to the `tinyformer` commands: each gets a one-line error that names the argument
and the value (exit status 2), never a traceback nor a silently wrong result. Closed and
broken output streams, unwritable output places, nonsense numbers, flags that contradict each
other, missing data, weights that are NaN, a full disk."""

from __future__ import annotations

import errno
import io
import os
import subprocess
import sys

from tinyformer import cli


def _tinyformer(*argv: str, close: int) -> subprocess.CompletedProcess:
    """The command line in a fresh process whose descriptor `close` (1: stdout, 2: stderr) is
    closed, as `>&-` or `2>&-` leave it."""
    return subprocess.run(
        [sys.executable, "-m", "tinyformer.cli", *argv],
        stdout=None if close == 1 else subprocess.PIPE,
        stderr=None if close == 2 else subprocess.PIPE,
        preexec_fn=lambda: os.close(close),
        text=True,
        timeout=120,
    )


def test_a_closed_stdout_or_stderr_is_written_as_dev_null():
    # a closed stdout was an AttributeError (sys.stdout is None) in every command
    done = _tinyformer("params", "gpt", close=1)
    assert done.returncode == 0 and done.stderr == ""
    # a closed stderr: the error was printed to stdout instead (print's file=None)
    done = _tinyformer("params", "gpt", "--config", "nope", close=2)
    assert done.returncode == 2 and done.stdout == ""


class _BrokenPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_an_error_into_a_broken_pipe_still_exits_2(monkeypatch):
    # `tinyformer params gpt --config nope 2>&1 | head -0`: the error met a closed pipe
    monkeypatch.setattr(sys, "stderr", _BrokenPipe())
    assert cli.main(["params", "gpt", "--config", "nope"]) == 2
