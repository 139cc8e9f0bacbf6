"""The process: its cores, and settings for a command-line run or a pool worker (never for a
library user's process): imports without the cyclic garbage collector, and an exit without
the collector's last pass.

Importing torch and transformers creates about a million long-lived objects (modules,
classes, functions); the collector walks them again and again while they are created, and
once more at exit. With `fast_imports()` an import runs with the collector paused, what it
loaded is then frozen (`gc.freeze`: kept out of every later collection, as it lives until
exit anyway), and the exit freezes the rest instead of collecting it. Measured on MiniLM's
probe (2 cores): importing torch and transformers 2.7 s -> 1.9 s, the exit 0.97 s -> 0.14 s.
Reference counting frees everything as before; only cyclic garbage made before the last
import that loaded a module stays until the process ends.

Once a command has returned, `skip_teardown` ends its process as soon as every exit handler
has run, without the interpreter's teardown of the modules it loaded (with torch,
transformers, pandas and matplotlib loaded, 0.2-0.3 s of every command): MiniLM's probe 9.37 s
-> 8.82 s, a fully stored run 0.47 s -> 0.39 s (medians, 2 cores).

A command that ends by waiting for another process (its figure being drawn) can leave that
wait to a successor (`hand_over_end`): a fresh interpreter that takes its place by `exec`, with
the same process id and streams, so the system frees the command's memory (torch, the model)
while the other process works rather than after it: MiniLM's probe has 16-20 ms from its figure
written to its exit instead of 67-75.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import importlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, NoReturn, TypeVar

Item = TypeVar("Item")

_lock = threading.Lock()
_importing = 0  # imports in progress, over all threads
_modules_before = 0  # len(sys.modules) when the outermost import began
_original_import = builtins.__import__
_end_status: int | None = None  # the exit status `skip_teardown` was given
_ends_after_command = False  # set by `ends_after_command`
_successor: tuple[str, tuple[str, ...], tuple[int, ...]] | None = None  # `hand_over_end`'s


def _import(*args, **kwargs):
    """`builtins.__import__` with the collector paused while any thread imports."""
    global _importing, _modules_before
    with _lock:
        if _importing == 0:
            _modules_before = len(sys.modules)
            gc.disable()
        _importing += 1
    try:
        return _original_import(*args, **kwargs)
    finally:
        with _lock:
            _importing -= 1
            if _importing == 0:
                if len(sys.modules) != _modules_before:
                    gc.freeze()
                gc.enable()


def fast_imports() -> None:
    """Run every later import of this process with the collector paused, freeze what loaded,
    and freeze instead of collecting at exit (see the module's docstring). Idempotent.

    Example:
        >>> fast_imports(); import colorsys; gc.isenabled()
        True
    """
    if builtins.__import__ is not _import:
        builtins.__import__ = _import
        atexit.register(_at_exit)


def skip_teardown(status: int) -> int:
    """Have this process, after `fast_imports`, end with `status` once every exit handler has
    run, without tearing down its modules; returns `status` (for `sys.exit`).

    For a command that has returned: its files are written and closed, so the teardown only
    frees memory the system takes back anyway. `fast_imports` registered its exit handler
    before any library could, so it runs after theirs (last registered, first run) and ends
    the process there (`os._exit`, the standard streams flushed first).
    """
    global _end_status
    _end_status = status
    return status


def ends_after_command() -> None:
    """Say that this process ends once its command returns (the console script, which then
    calls `skip_teardown`): the command may leave its last wait to a successor
    (`hand_over_end`)."""
    global _ends_after_command
    _ends_after_command = True


def hand_over_end(function: str, *args: str, fds: Sequence[int] = ()) -> bool:
    """Have this process end in a successor, where it ends once its command returns
    (`ends_after_command`) and the system replaces a process in place (POSIX `exec`): after
    every exit handler, a fresh interpreter takes its place (the same process id, children and
    standard streams, `fds` kept open) and ends with the status `function(status, *args)`
    returns, `function` named "module:name" and `status` the command's. True if so; False
    elsewhere (in-process callers, Windows), and the caller does the work itself."""
    global _successor
    if not (_ends_after_command and os.name == "posix"):
        return False
    _successor = (function, args, tuple(fds))
    return True


def python_command(code: str) -> list[str]:
    """The arguments that run `code` in a fresh interpreter of this one, with this package
    importable (its folder appended to the path where the interpreter's own lacks it, as in a
    source tree; appended, so it never shadows the standard library)."""
    root = str(Path(__file__).resolve().parents[1])
    start = f"import sys; {root!r} in sys.path or sys.path.append({root!r}); "
    return [sys.executable, "-c", start + code]


def _at_exit() -> None:
    """The last exit handler: freeze what is left instead of collecting it; then, after
    `skip_teardown`, end the process with its status (`exit_now`), or replace it by its
    successor (`hand_over_end`)."""
    gc.freeze()
    if _end_status is None:
        return
    if _successor is None:
        exit_now(_end_status)
    function, args, fds = _successor
    module, name = function.split(":")
    for fd in fds:
        os.set_inheritable(fd, True)
    _flush_streams()  # what is still buffered here would be lost with this interpreter
    call = f"{name}({_end_status}, *{args!r})"
    code = f"from {module} import {name}; from {__name__} import exit_now; exit_now({call})"
    try:
        os.execv(sys.executable, python_command(code))
    except OSError:  # no interpreter to start (removed since): the successor's work here
        exit_now(getattr(importlib.import_module(module), name)(_end_status, *args))


def exit_now(status: int) -> NoReturn:
    """End this process with `status` at once, the standard streams flushed first: no exit
    handler or teardown after (a successor's own teardown took 15 ms of a probe's end)."""
    _flush_streams()
    os._exit(status)


def drop_output(stream: IO[str]) -> None:
    """Point `stream`'s descriptor at the null device: its reader went away early (`| head`,
    a pager quit), so the rest of its output, what is buffered included, is dropped quietly
    while the command finishes its files (Python's advice on a broken pipe, without exiting)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()


def cpu_cores() -> int:
    """The cores this process may use (its CPU affinity where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def map_forked(
    work: Callable[[Item], tuple[bytes, ...]], items: Sequence[Item], processes: int
) -> list[tuple[bytes, ...]]:
    """`[work(item) for item in items]`, shared out over this process and up to
    `processes` - 1 forked children: with p processes, child k (1 <= k < p) computes items k,
    k + p, k + 2 p, ... and sends their byte strings back through a pipe (each a length,
    then its bytes: nothing is unpickled) while this process computes items 0, p, 2 p, ...

    Only on Linux, where a forked child keeps a copy of everything (matplotlib figures
    included) and needs nothing but what `work` uses: not torch's thread pools, which a fork
    does not copy, so `work` must not call torch. Elsewhere, or with one process or item, all
    runs here. A child that fails (an error, killed) has its items computed here again, so
    an error is raised here, exactly as without children; an error here ends the children.

    Example:
        >>> map_forked(lambda n: (b"x" * n, b"y"), [3, 1, 2], processes=2)
        [(b'xxx', b'y'), (b'x', b'y'), (b'xx', b'y')]
    """
    n = min(processes, len(items)) if sys.platform == "linux" else 1
    if n <= 1:
        return [work(item) for item in items]
    children: list[tuple[range, int, int]] = []  # (its items, pid, read end of its pipe)
    results: dict[int, tuple[bytes, ...]] = {}
    try:
        for k in range(1, n):
            share = range(k, len(items), n)
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its share, then out without the parent's exit handlers
                status = 1
                try:
                    for fd in [read_end, *(child[2] for child in children)]:
                        os.close(fd)
                    status = _send(write_end, work, [items[i] for i in share])
                finally:  # whatever happened: never back into the parent's code
                    os._exit(status)
            os.close(write_end)
            children.append((share, pid, read_end))
        results |= {i: work(items[i]) for i in range(0, len(items), n)}
        while children:
            share, pid, read_end = children.pop(0)
            try:
                with os.fdopen(read_end, "rb") as pipe:
                    data = pipe.read()
            finally:  # the pipe closed: the child has sent all or ends on writing
                failed = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
            values = None if failed else _split(data, len(share))
            if values is None:
                values = [work(items[i]) for i in share]
            results |= dict(zip(share, values, strict=True))
    finally:  # after an error here: a child writing to its closed pipe ends at once
        for _, _, read_end in children:
            os.close(read_end)
        for _, pid, _ in children:
            os.waitpid(pid, 0)
    return [results[i] for i in range(len(items))]


def _send(write_end: int, work: Callable[[Item], tuple[bytes, ...]], items: list[Item]) -> int:
    """A forked child's part of `map_forked`: compute, send each item's byte strings (their
    number, then each one's length and bytes); its exit status (1: anything failed, and the
    parent computes its items again).

    What it says (a warning) goes to new standard streams on the same files: the inherited
    ones may hold a lock that a thread of the parent (a progress bar's, say) held at the
    fork, and no thread of the parent is here to release it."""
    with contextlib.suppress(OSError):  # a closed stream: the inherited one stays
        sys.stdout, sys.stderr = (
            open(os.dup(fd), "w", buffering=1, errors="backslashreplace")  # noqa: SIM115
            for fd in (1, 2)  # open until the child exits
        )
    try:
        values = [work(item) for item in items]  # all first: the parent reads when it is done
        with os.fdopen(write_end, "wb") as pipe:
            for parts in values:
                pipe.write(len(parts).to_bytes(8, "big"))
                for part in parts:
                    pipe.write(len(part).to_bytes(8, "big"))
                    pipe.write(part)
    except BaseException:  # noqa: BLE001 - the parent computes these items itself
        return 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    return 0


def _split(data: bytes, n_items: int) -> list[tuple[bytes, ...]] | None:
    """The byte strings of `n_items` items as `_send` wrote them; None unless `data` holds
    exactly that."""
    values, at = [], 0
    for _ in range(n_items):
        count, at = int.from_bytes(data[at : at + 8], "big"), at + 8
        parts = []
        for _ in range(count):
            size, at = int.from_bytes(data[at : at + 8], "big"), at + 8
            parts.append(data[at : at + size])
            at += size
            if at > len(data):  # cut short
                return None
        values.append(tuple(parts))
    return values if at == len(data) else None


def available_memory() -> int:
    """Bytes of memory this process can still take: the smaller of the system's available
    memory (MemAvailable of /proc/meminfo, else the physical pages) and a cgroup limit.

    Example:
        >>> available_memory() > 0
        True
    """
    available = _meminfo_available()
    try:  # a container's limit (cgroup v2), less what the group already uses
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            available = min(available, max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    return available


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**63 - 1  # unknown: no refusal on memory grounds
