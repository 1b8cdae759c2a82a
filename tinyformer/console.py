"""Output that outlives its reader: `tinyformer train gpt | head -1` must still finish the run
and save it, although every print after the first line meets a closed pipe; and a command run
with a closed stdout or stderr (`tinyformer train gpt >&-`, as cron and some launchers do) must
run as if it wrote to /dev/null."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

__all__ = ["QuietWhenClosed", "quiet_when_closed"]


class QuietWhenClosed:
    """A text stream that writes to `stream` until the reader goes away (BrokenPipeError), and
    from then on discards what it is given."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        # What is still buffered would fail again when the interpreter flushes at exit.
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._gone()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def __getattr__(self, name: str) -> Any:  # encoding, errors, closed, ...
        return getattr(self.stream, name)


def _open_in_place_of_closed(fd: int) -> None:
    """Put /dev/null on descriptor `fd` if it is closed: otherwise the next file this process
    opens (a checkpoint) takes its number, and a child process's output would go into it."""
    try:
        os.fstat(fd)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)


@contextlib.contextmanager
def quiet_when_closed() -> Iterator[None]:
    """Within the `with`, sys.stdout and sys.stderr go quiet instead of raising once their
    reader is gone, and one that was closed when the program started (Python then sets it to
    None, which print() and progress bars fail on) writes to /dev/null."""
    with contextlib.ExitStack() as stack:
        for name, fd, redirect in (
            ("stdout", 1, contextlib.redirect_stdout),
            ("stderr", 2, contextlib.redirect_stderr),
        ):
            stream = getattr(sys, name)
            if stream is None:
                _open_in_place_of_closed(fd)
                stream = stack.enter_context(open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
            stack.enter_context(redirect(QuietWhenClosed(stream)))
        yield
