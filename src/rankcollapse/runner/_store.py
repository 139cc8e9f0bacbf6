"""One file per finished unit, written atomically and checked on read.

A unit file is `MAGIC`, the sha256 of the payload, a newline, then the pickled payload
({"unit", "rows", "seconds"}). It is written to a temporary file in the same folder and
`os.replace`d, so a killed run leaves either the whole file or none; a file whose checksum
or unit does not match (a partial copy, a disk error, a hand edit) is treated as missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

MAGIC = b"rankcollapse-unit-v1\n"


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: the text every hash is taken of.

    Example:
        >>> canonical_json({"b": 1, "a": [1.5, "x"]})
        '{"a":[1.5,"x"],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(value: Any) -> str:
    """sha256 hex digest of the canonical JSON of `value`."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that readers see the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_unit(path: Path, unit: dict, rows: pd.DataFrame, seconds: float) -> None:
    payload = pickle.dumps({"unit": unit, "rows": rows, "seconds": seconds}, protocol=5)
    write_atomic(path, MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def load_unit(path: Path, unit: dict) -> tuple[pd.DataFrame, float] | None:
    """The stored rows and run time of `unit`, or None when the file is missing or corrupt."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    head = len(MAGIC)
    checksum, payload = data[head : head + 64], data[head + 65 :]
    if not data.startswith(MAGIC) or hashlib.sha256(payload).hexdigest().encode() != checksum:
        return None
    try:
        stored = pickle.loads(payload)
    # Written by another pandas/python version, for instance: recompute rather than fail.
    except (pickle.UnpicklingError, AttributeError, ImportError, EOFError, TypeError, ValueError):
        return None
    if canonical_json(stored.get("unit")) != canonical_json(unit):
        return None
    return stored["rows"], float(stored["seconds"])
