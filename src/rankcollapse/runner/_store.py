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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankcollapse.errors import InputError, UnitError
from rankcollapse.files import canonical_json, write_atomic
from rankcollapse.lazy import lazy_module
from rankcollapse.reading import MiB, read_bytes

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:  # a fully stored run reads unit files without building their rows
    np, pd = lazy_module("numpy"), lazy_module("pandas")

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
) -> str:
    """Store a unit's rows, run time and where it ran (node, device) as a unit file; returns
    the sha256 of its second line (the file's checksum)."""
    body = {
        "unit": unit,
        "seconds": seconds,
        "where": where or {},
        "n_rows": len(rows),
        "columns": [_column(unit, str(name), rows[name]) for name in rows.columns],
    }
    line = json.dumps(body, allow_nan=False, separators=(",", ":")).encode()
    checksum = hashlib.sha256(line).hexdigest()
    header = {"format": FORMAT, "version": VERSION, "sha256": checksum}
    write_atomic(path, json.dumps(header).encode() + b"\n" + line + b"\n")
    return checksum


@dataclass
class UnitFile:
    """A unit file read and checked: its rows as stored columns (`frame` builds the table),
    run time, where it ran and its checksum (the sha256 of its second line)."""

    columns: list[dict[str, Any]]
    n_rows: int
    seconds: float
    where: dict[str, Any]
    sha256: str

    def frame(self) -> pd.DataFrame:
        """The rows, each column of its stored dtype (ValueError where a column is malformed)."""
        return pd.DataFrame(
            {c["name"]: _series(c, self.n_rows) for c in self.columns},
            index=pd.RangeIndex(self.n_rows),
        )


def load_unit(path: Path, unit: dict) -> tuple[tuple[pd.DataFrame, float, dict] | None, str]:
    """(rows, seconds, where) of `unit` stored at `path` and "", or None and why it is unusable.

    The reason is "" for a missing file, else a short phrase for the manifest.
    """
    found, reason = read_unit(path, unit)
    if found is None:
        return None, reason
    try:
        return (found.frame(), found.seconds, found.where), ""
    except (ValueError, TypeError, KeyError) as err:
        return None, malformed(err)


def read_unit(path: Path, unit: dict) -> tuple[UnitFile | None, str]:
    """`unit`'s file at `path`, checked (format, checksum, unit, the columns' dtypes and
    lengths) without building its rows, and "", or None and why it is unusable (as
    `load_unit`)."""
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
        n_rows, columns = body["n_rows"], body["columns"]
        for column in columns:
            _check_column(column, n_rows)
        found = UnitFile(columns, n_rows, float(body["seconds"]), dict(body["where"]), checksum)
        return found, ""
    except (ValueError, TypeError, KeyError, RecursionError) as err:
        return None, malformed(err)


def malformed(err: Exception) -> str:
    return f"malformed columns ({type(err).__name__}: {err})"


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


def _check_column(column: dict, n_rows: int) -> None:
    """A stored column's name, dtype and length (its values are checked as they are decoded)."""
    dtype, name, values = column["dtype"], column["name"], column["values"]
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not allowed")
    if not isinstance(name, str) or not isinstance(values, list):
        raise TypeError(f"column {name!r} is not a name and a list of values")
    if len(values) != n_rows:
        raise ValueError(f"column {name!r} has {len(values)} values, not {n_rows}")


def _series(column: dict, n_rows: int) -> pd.Series:
    values = [_decode(v) for v in column["values"]]
    return pd.Series(values, dtype=column["dtype"], index=pd.RangeIndex(n_rows))


def _no_constant(name: str) -> None:
    raise ValueError(f"bare {name} in a unit file")
