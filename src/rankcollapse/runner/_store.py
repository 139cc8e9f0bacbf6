"""One file per finished unit: data, never code, written atomically and checked on read.

A unit file is two lines of JSON. The first is a header: the format name, its version and the
sha256 of the second line. The second holds the unit, its run time and its rows as typed
columns:

    {"format": "rankcollapse-unit", "version": 2, "sha256": "<hex of line 2>"}
    {"unit": {...}, "seconds": 0.12, "where": {...}, "n_rows": 8,
     "columns": [{"name": "layer", "dtype": "int64", "values": [0, 1, ...]}, ...]}

Floats are written as Python's shortest round-trip decimal, so they read back bit for bit;
NaN and infinities as {"float": "nan"} / {"float": "inf"} / {"float": "-inf"}. Reading parses
JSON only, so a file from a stranger cannot run code. A file that is missing, truncated, edited,
of another format (an older pickle, for instance: never unpickled) or of another unit reads as
`None` plus the reason, and the runner recomputes that unit.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rankcollapse.errors import InputError, UnitError
from rankcollapse.files import canonical_json, write_atomic
from rankcollapse.reading import MiB, read_bytes

FORMAT, VERSION = "rankcollapse-unit", 2
SUFFIX = ".json"
OLD_SUFFIX = ".pkl"  # version 1 unit files were pickles: never read, only reported
MAX_UNIT_BYTES = 1024 * MiB  # a unit's rows are kilobytes to megabytes; a GiB is not one


class _Unusable(InputError):
    """Why a unit file cannot be read (recorded in the manifest; the unit is recomputed)."""


# pandas dtypes a column may have: what results.csv can hold (see experiments' contract)
DTYPES = ("bool", "object", "str", "string", "float16", "float32", "float64") + tuple(
    f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)
)


def save_unit(
    path: Path, unit: dict, rows: pd.DataFrame, seconds: float, where: dict | None = None
) -> None:
    """Store a unit's rows, run time and where it ran (node, device) as a unit file."""
    body = {
        "unit": unit,
        "seconds": seconds,
        "where": where or {},
        "n_rows": len(rows),
        "columns": [_column(unit, str(name), rows[name]) for name in rows.columns],
    }
    line = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
    header = {"format": FORMAT, "version": VERSION, "sha256": hashlib.sha256(line).hexdigest()}
    write_atomic(path, json.dumps(header).encode() + b"\n" + line + b"\n")


def load_unit(path: Path, unit: dict) -> tuple[tuple[pd.DataFrame, float, dict] | None, str]:
    """(rows, seconds, where) of `unit` stored at `path` and "", or None and why it is unusable.

    The reason is "" for a missing file, else a short phrase for the manifest.
    """
    try:
        data = read_bytes(path, MAX_UNIT_BYTES, error=_Unusable)
    except _Unusable as err:  # missing, a folder or FIFO (never opened), huge, unreadable
        return None, "" if str(err) == "missing" else str(err)
    first, _, rest = data.partition(b"\n")
    try:
        header = json.loads(first)
        fmt, version, checksum = header["format"], header["version"], header["sha256"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None, "not a unit file of this version (never executed, never unpickled)"
    if (fmt, version) != (FORMAT, VERSION):
        return None, f"unit file format {fmt!r} version {version!r}, not {FORMAT!r} {VERSION}"
    line = rest.removesuffix(b"\n")
    if hashlib.sha256(line).hexdigest() != checksum:
        return None, "checksum mismatch (truncated or edited)"
    try:
        body = json.loads(line, parse_constant=_no_constant)
        if canonical_json(body["unit"]) != canonical_json(unit):
            return None, "holds another unit"
        rows = pd.DataFrame(
            {c["name"]: _series(c, body["n_rows"]) for c in body["columns"]},
            index=pd.RangeIndex(body["n_rows"]),
        )
        return (rows, float(body["seconds"]), dict(body["where"])), ""
    except (ValueError, TypeError, KeyError, RecursionError) as err:
        return None, f"malformed columns ({type(err).__name__}: {err})"


def _column(unit: dict, name: str, series: pd.Series) -> dict[str, Any]:
    dtype = str(series.dtype)
    if dtype not in DTYPES:
        raise UnitError(
            f"unit {canonical_json(unit)} returned column {name!r} of dtype {dtype}; unit rows "
            "must be plain str, int, float or bool columns (convert it, e.g. .astype(str))."
        )
    return {"name": name, "dtype": dtype, "values": [_encode(unit, name, v) for v in series]}


def _encode(unit: dict, name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer, np.bool_)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"float": repr(value)}
    raise UnitError(
        f"unit {canonical_json(unit)} returned a {type(value).__name__} in column {name!r}; "
        "unit rows hold str, int, float, bool or None values only."
    )


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        text = value["float"]
        if text not in ("nan", "inf", "-inf"):
            raise ValueError(f"unknown float {text!r}")
        return float(text)
    return value


def _series(column: dict, n_rows: int) -> pd.Series:
    dtype = column["dtype"]
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not allowed")
    values = [_decode(v) for v in column["values"]]
    if len(values) != n_rows:
        raise ValueError(f"column {column['name']!r} has {len(values)} values, not {n_rows}")
    return pd.Series(values, dtype=dtype, index=pd.RangeIndex(n_rows))


def _no_constant(name: str) -> None:
    raise ValueError(f"bare {name} in a unit file")
