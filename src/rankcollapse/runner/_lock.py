"""One run at a time per run folder: an exclusive `flock` on DIR/.lock for the whole run.

A second run of the same config (same folder) waits until the first ends, then finds its
units stored and reuses them: no unit is computed twice, no file written by two processes.
Runs of other configs have other folders and other locks. The kernel drops the lock when its
holder exits, however it exits (a SIGKILL included), so a stale lock file never blocks.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rankcollapse.files import output_error


@contextlib.contextmanager
def run_lock(folder: Path, notify: Callable[[str], None] | None = None) -> Iterator[float]:
    """Hold the lock of `folder` inside the block; yields the seconds spent waiting for it."""
    path = folder / ".lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise output_error(path, err) from err
    try:
        waited = 0.0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            if notify:
                notify(
                    f"{folder} is in use by another run of the same config (pid {holder}); "
                    "waiting for it to finish, then its units are reused."
                )
            start = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = time.monotonic() - start
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield waited
    finally:
        os.close(fd)  # releases the lock
