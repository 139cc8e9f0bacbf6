"""File helpers for every package that writes: atomic writes, canonical JSON and its digest.

A file is written to a temporary name in its own folder, flushed to disk and renamed over the
target (`os.replace`), so a reader (or a run resumed after a kill) sees the old file or the
whole new one, never half of it. Files get the permissions the user's umask gives (0644 under
umask 022), like any file a shell would create, so a colleague on a shared disk can read a run.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from rankcollapse.errors import OutputError

TMP_SUFFIX = ".tmp"  # temporary files are `.<name>.<random>.tmp` beside their target


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: the text every hash is taken of.

    Example:
        >>> canonical_json({"b": 1, "a": [1.5, "x"]})
        '{"a":[1.5,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(value: Any) -> str:
    """sha256 hex digest of the canonical JSON of `value`.

    Example:
        >>> digest({"a": 1}) == digest({"a": 1}) != digest({"a": 2})
        True
    """
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one.

    Raises OutputError (naming the file and the cause) when the folder cannot be written, e.g.
    read-only or full; the temporary file is removed and the old `path`, if any, is untouched.
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}{TMP_SUFFIX}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # os.open with 0o666 lets the umask decide the permissions (mkstemp would force 0600).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise output_error(path, err) from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def append_whole(path: str | os.PathLike, data: bytes) -> None:
    """Append `data` to `path` (created if missing) in one synced write, so the file ends with
    all of it or none of it: a write that fails (full disk, interrupt) is cut back.

    Only a kill in the middle of the write itself can leave a part behind; readers of an
    appended file (e.g. `rankcollapse.monitor.CsvLog`) drop such a tail.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as err:
        raise output_error(path, err) from err
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.ftruncate(fd, size)
            raise
    except OSError as err:
        raise output_error(path, err) from err
    finally:
        os.close(fd)


def check_writable(folder: str | os.PathLike) -> None:
    """Create `folder` and write, sync and remove a probe file in it, or raise OutputError.

    Catches a read-only, foreign or full output folder before any work starts.
    """
    probe = Path(folder) / f".write-probe-{secrets.token_hex(4)}"
    try:
        probe.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            os.write(fd, b"rankcollapse write probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        raise output_error(probe, err) from err
    finally:
        probe.unlink(missing_ok=True)


def remove_partial(folder: str | os.PathLike) -> None:
    """Remove the temporary files a killed writer left in `folder` and below (call this only
    while no other process writes there, e.g. under the run lock)."""
    for partial in Path(folder).rglob(f".*{TMP_SUFFIX}"):
        partial.unlink(missing_ok=True)


def output_error(path: Path, err: OSError) -> OutputError:
    """An OSError while writing `path`, as a message that says what to do."""
    fixes = {
        errno.ENOSPC: "the disk is full; free some space or pass --out on another disk",
        errno.EDQUOT: "the disk quota is used up; free some space or pass --out elsewhere",
        errno.EACCES: "the folder is not writable by you; fix its permissions or pass --out",
        errno.EPERM: "the folder is not writable by you; fix its permissions or pass --out",
        errno.EROFS: "the file system is read-only; pass --out on a writable disk",
    }
    fix = fixes.get(err.errno, "check the folder, or pass --out to write elsewhere")
    reason = err.strerror or type(err).__name__
    return OutputError(
        f"cannot write {str(path)!r}: {reason}; {fix}. No file was left half-written."
    )
