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
import stat
from pathlib import Path
from typing import Any

from rankcollapse.errors import OutputError, RankCollapseError
from rankcollapse.reading import MiB, read_bytes, read_json, shown

TMP_SUFFIX = ".tmp"  # temporary files are `.<name>.<random>.tmp` beside their target
MARKER = ".rankcollapse.json"  # in every output folder: which command wrote it, of which config


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


def is_directory(name: str | os.PathLike) -> bool:
    """True when `name` is a folder here; False for a name no file system could hold (too long,
    a NUL byte) as well as a missing one, so a bad name reaches the caller's own message.

    Example:
        >>> is_directory("."), is_directory("x" * 5000), is_directory("a\\0b")
        (True, False, False)
    """
    try:
        return Path(name).is_dir()
    except (OSError, ValueError):
        return False


def json_bytes(value: Any) -> bytes:
    """`value` as indented JSON text, one trailing newline (what run folders store).

    Example:
        >>> json_bytes({"a": 1})
        b'{\\n  "a": 1\\n}\\n'
    """
    return (json.dumps(value, indent=2, default=str) + "\n").encode()


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


def write_changed(path: str | os.PathLike, data: bytes) -> bool:
    """`write_atomic(path, data)` unless `path` is a regular file (not a link) holding exactly
    `data` already, so that a command run again on stored work writes nothing; returns whether
    it wrote."""
    try:
        if read_bytes(path, len(data), follow=False) == data:
            return False
    except RankCollapseError:  # missing, a link, larger or unreadable: written anew
        pass
    write_atomic(path, data)
    return True


def append_whole(path: str | os.PathLike, data: bytes) -> None:
    """Append `data` to `path` (created if missing) in one synced write, so the file ends with
    all of it or none of it: a write that fails (full disk, interrupt) is cut back.

    Only a kill in the middle of the write itself can leave a part behind; readers of an
    appended file (e.g. `rankcollapse.measure.monitor.CsvLog`) drop such a tail.
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
    """An OSError while writing `path`, as a message that says what to do (in words of files,
    not of flags: the command line adds its own, see `rankcollapse.cli`)."""
    fixes = {
        errno.ENOSPC: "the disk is full; free some space or write to another disk",
        errno.EDQUOT: "the disk quota is used up; free some space or write elsewhere",
        errno.EACCES: "the folder is not writable by you; fix its permissions or write elsewhere",
        errno.EPERM: "the folder is not writable by you; fix its permissions or write elsewhere",
        errno.EROFS: "the file system is read-only; write to a writable disk",
        errno.ENOENT: "the folder cannot be created there; write to a folder you can write",
        errno.ENAMETOOLONG: "a name in the path is longer than the file system allows; "
        "choose a shorter name",
    }
    fix = fixes.get(err.errno or 0, "check the folder, or write elsewhere")
    reason = err.strerror or type(err).__name__
    return OutputError(
        f"cannot write {str(path)!r}: {reason}; {fix}. No file was left half-written."
    )


def check_replaceable(path: str | os.PathLike, signature: str) -> None:
    """Refuse to replace `path` unless it is missing or was written by rankcollapse: its first
    4 KB hold `signature` (a line every version of that file has, e.g. its title). For files
    written into a folder the command does not own (results/reproduction.md, index.html).

    Raises OutputError naming the file; nothing is changed.
    """
    path = Path(path)
    if path.is_symlink():
        raise OutputError(
            f"{shown(path)!r} is a symbolic link; it is never followed nor replaced: remove the "
            "link, or write elsewhere. Nothing was changed."
        )
    head = b""
    try:  # never blocks on a FIFO: opened without waiting, read only if a regular file
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return
    except OSError:
        fd = None
    if fd is not None:
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                head = os.read(fd, 4096)
        finally:
            os.close(fd)
    if signature.encode() not in head:
        raise OutputError(
            f"{str(path)!r} exists and was not written by rankcollapse (it lacks "
            f"{signature!r}); move it away, or write elsewhere. Nothing was changed."
        )


def claim_output(
    folder: str | os.PathLike,
    command: str,
    config: str | None = None,
    *,
    flag: str | None = None,
    label: str | None = None,
) -> Path:
    """The output-folder rule of every command: check `folder`, create it and mark it ours.

    A folder is a directory or can be created; never a file, a device or a path under a file.
    A folder that holds something is used only when it is ours: its marker (`MARKER`) names
    the same `command` and, where the command has one, the same `config` (a hash), so a run is
    never mixed with another config's and a user's own files are never overwritten (a run
    folder an older version wrote without a marker is known by its manifest). `label` says in
    words what the folder holds ("toy network, skip=on"), for `compare` to name it by. `flag`
    is how the caller's user named the folder (`--out` on the command line); messages say
    "output folder" without it.

    Raises OutputError (one sentence: the folder, what is wrong, what to pass); nothing in a
    refused folder is changed. `check_output` makes the same checks without writing.
    """
    path = check_output(folder, command, config, flag=flag)
    check_writable(path)
    mark = {"written_by": "rankcollapse", "command": command, "config": config, "label": label}
    if read_marker(path) != mark:
        write_atomic(path / MARKER, (json.dumps(mark) + "\n").encode())
    return path


def check_output(
    folder: str | os.PathLike,
    command: str,
    config: str | None = None,
    *,
    flag: str | None = None,
) -> Path:
    """The checks of `claim_output`, writing nothing: made before any work starts, so a
    command whose input turns out bad leaves no empty folder behind."""
    path = Path(folder)
    shown = f"{flag or 'output folder'} {str(path)!r}"
    fix = "pass a folder (it is created if missing)"
    kind = _kind(path, shown)
    if kind == "other":
        raise OutputError(f"{shown} is not a folder (a device or a special file); {fix}.")
    if kind == "file":
        raise OutputError(f"{shown} is a file; {fix}.")
    if kind == "folder":
        _check_ours(path, shown, command, config, flag)
        return path
    parent = path.parent
    while _kind(parent, shown) in ("missing", "under a file") and parent != parent.parent:
        parent = parent.parent
    if _kind(parent, shown) != "folder":
        raise OutputError(f"{shown} lies under {str(parent)!r}, which is a file; {fix}.")
    probe = parent / f".rankcollapse-probe-{secrets.token_hex(4)}"
    try:  # a folder made and removed at once: can the first missing part be created there?
        probe.mkdir()
        probe.rmdir()
    except OSError as err:
        raise output_error(probe, err) from err
    return path


def _kind(path: Path, shown: str) -> str:
    """'folder', 'file', 'other' (a device, a FIFO), 'missing' or 'under a file' for `path`;
    a name no file system can hold (too long, a NUL byte) is an OutputError naming `shown`."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing"
    except NotADirectoryError:
        return "under a file"
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        if getattr(err, "errno", None) == errno.ENAMETOOLONG:
            reason = "a name in it is longer than the file system allows (255 bytes a name)"
        raise OutputError(
            f"{shown} cannot be used: {reason}; pass a shorter folder name."
        ) from None
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def _check_ours(path: Path, shown: str, command: str, config: str | None, flag: str | None) -> None:
    entries = sorted(e.name for e in path.iterdir() if e.name != MARKER)
    marker = read_marker(path) or _legacy_run_marker(path)
    if marker is None and not entries:
        return
    keep = "nothing in it was changed"
    if marker is None:
        listed = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
        raise OutputError(
            f"{shown} holds files rankcollapse did not write ({listed}); pass an empty or new "
            f"folder ({keep})."
        )
    if marker.get("command") != command:
        raise OutputError(
            f"{shown} holds the output of `rankcollapse {marker.get('command')}`, not of "
            f"`rankcollapse {command}`; pass another folder ({keep})."
        )
    if config is not None and marker.get("config") != config:
        raise OutputError(
            f"{shown} holds a run of another config ({str(marker.get('config'))[:10]}, this one "
            f"is {config[:10]}); pass another folder"
            + (f", or leave {flag} out for one folder per config" if flag else "")
            + f" ({keep})."
        )


def read_marker(folder: str | os.PathLike) -> dict | None:
    """The marker of an output folder (command, config, label), or None when it has none."""
    try:
        value = read_json(Path(folder) / MARKER, 4096, follow=False)
    except RankCollapseError:  # missing, a link or not a file (never opened), not JSON
        return None
    return value if isinstance(value, dict) and value.get("written_by") == "rankcollapse" else None


def _legacy_run_marker(path: Path) -> dict | None:
    """The marker of a run folder written before markers existed, read from its manifest."""
    try:
        manifest = read_json(path / "manifest.json", 64 * MiB, follow=False)
    except RankCollapseError:
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config_hash"), str):
        return None
    return {"command": "run", "config": manifest["config_hash"]}
