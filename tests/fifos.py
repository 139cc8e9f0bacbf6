"""Special files for the tests of readers that must refuse them unopened: a named pipe (FIFO)
where a file belongs (opening one for reading waits for a writer forever), and a guard that
fails a test whose reader waited instead of hanging the suite (the `no_hang` fixture of
tests/conftest.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def fifo(path: str | os.PathLike) -> Path:
    """A named pipe at `path` (a file there is replaced), with no writer."""
    path = Path(path)
    if path.is_file() or path.is_symlink():
        path.unlink()
    os.mkfifo(path)
    return path


@contextmanager
def no_hang(seconds: int = 60) -> Iterator[None]:
    """Raise TimeoutError in the test after `seconds` (a reader that opened a FIFO waits)."""

    def hung(*_: object) -> None:
        raise TimeoutError("a reader waited: a FIFO was opened")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
