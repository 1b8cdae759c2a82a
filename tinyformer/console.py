"""Output that outlives its reader: `tinyformer train gpt | head -1` must still finish the run
and save it, although every print after the first line meets a closed pipe."""

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


@contextlib.contextmanager
def quiet_when_closed() -> Iterator[None]:
    """Within the `with`, sys.stdout goes quiet instead of raising once its reader is gone."""
    with contextlib.redirect_stdout(QuietWhenClosed(sys.stdout)):
        yield
