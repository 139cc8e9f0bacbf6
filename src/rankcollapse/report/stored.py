"""Readers of a results folder: every file is data from outside until it passes its schema.

`manifest.json` and `claims.json` are parsed as JSON and checked with pydantic, `config.yaml`
with the safe YAML loader and the experiment's own config model, `results.csv` for its size,
line lengths, field counts, column names and column types before pandas reads it; every file
through `rankcollapse.reading`, within a stated size (a FIFO or device is never opened), and
never through a symbolic link: a results folder is a closed world, so a link inside one is
refused, never followed (`reading.refuse_links` for a whole folder). A file that
fails raises `DamagedFileError`, one sentence naming the file, what is wrong and the fix;
nothing is written. Readers that list many folders (`report --index`, `reproduce`) skip a
damaged one with a line saying so and list the others.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from rankcollapse.lazy import lazy_module
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.files import digest, read_marker
from rankcollapse.reading import MiB, check_csv, open_bounded, read_json, read_yaml, shown

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from rankcollapse.experiments import Experiment

MAX_JSON = 64 * MiB  # a manifest or claims file larger than this is not ours
MAX_YAML = MiB  # a config is a few lines; a megabyte of YAML is not one
MAX_CSV = 1024 * MiB  # a results.csv of a paper preset is megabytes; a GiB is not ours
FIX = "delete the folder and rerun, or pass another folder"


class DamagedFileError(InputError):
    """A file of a results folder that does not hold what its schema says."""


def damaged(path: Path, problem: str, fix: str = FIX) -> DamagedFileError:
    """The one message for a damaged file: which file, what is wrong, what to do."""
    return DamagedFileError(f"{shown(path)} is damaged ({problem}); {fix}.")


class Manifest(BaseModel):
    """What `rankcollapse run` records beside its results (other keys are kept as they are)."""

    model_config = ConfigDict(extra="allow")
    experiment: str
    preset: str
    config_hash: str | None = None
    status: str = "complete"
    started: str | None = None
    finished: str | None = None
    results_sha256: str | None = None  # of results.csv as the run wrote it
    n_units: int | None = None
    n_cached: int | None = None
    host: str | None = None
    overrides: dict[str, Any] = {}  # the run's --set values, as typed (shown by the index)
    packages: dict[str, str] = {}


class ClaimRecord(BaseModel):
    """One entry of claims.json (its other keys are kept as they are)."""

    model_config = ConfigDict(extra="allow")
    id: str
    kind: str = "finding"
    text: str
    expected: str
    measured: Any
    passed: bool
    verdict: Literal["PASS", "FAIL", "NOT TESTED"] | None = None  # None: written before verdicts


def _json(path: Path) -> Any:
    return read_json(path, MAX_JSON, error=lambda problem: damaged(path, problem), follow=False)


def _schema_problem(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(map(str, first["loc"])) or "the top level"
    return f"{where}: {first['msg']}"


def read_manifest(folder: str | Path) -> dict[str, Any]:
    """`folder/manifest.json`, checked (`Manifest`): a JSON object with the run's experiment
    and preset; returned as stored."""
    path = Path(folder) / "manifest.json"
    value = _json(path)
    if not isinstance(value, dict):
        raise damaged(path, f"holds a JSON {type(value).__name__}, not an object")
    try:
        Manifest.model_validate(value)
    except ValidationError as err:
        raise damaged(path, _schema_problem(err)) from None
    return value


def config_hash(name: str, config: BaseModel) -> str:
    """sha256 of the experiment name and the resolved config (canonical JSON): the name of a
    run folder and, in its manifest, the proof that config.yaml is the run's config."""
    return _hash(name, config.model_dump(mode="json"))


def _hash(name: str, values: Any) -> str:
    return digest({"experiment": name, "config": values})


def overrides_text(overrides: dict[str, Any]) -> str:
    """The `--set` overrides of a run (its manifest's) as typed, nested keys dotted, or '-'.

    Example:
        >>> overrides_text({"n_layers": 4, "masks": ["causal", "window:1"], "toy": {"n": 8}})
        'n_layers=4 masks=["causal", "window:1"] toy.n=8'
    """

    def typed(prefix: str, value: Any) -> list[str]:
        if isinstance(value, dict) and value:
            return [part for k, v in value.items() for part in typed(f"{prefix}.{k}", v)]
        return [f"{prefix}={value if isinstance(value, str) else json.dumps(value)}"]

    return " ".join(part for k, v in overrides.items() for part in typed(k, v)) or "-"


def read_claims(folder: str | Path) -> list[dict[str, Any]]:
    """`folder/claims.json`, checked: a list of claims, each with an id and a kind."""
    path = Path(folder) / "claims.json"
    value = _json(path)
    if not isinstance(value, list):
        raise damaged(path, f"holds a JSON {type(value).__name__}, not a list of claims")
    try:
        return [ClaimRecord.model_validate(c).model_dump() for c in value]
    except ValidationError as err:
        raise damaged(path, _schema_problem(err)) from None


def read_config(
    folder: str | Path, experiment: Experiment, *, sha256: str | None = None
) -> BaseModel:
    """`folder/config.yaml` (safe loader only: a `!!python` tag is refused, never run) resolved
    as every config is (`Experiment.make_config`, no preset: the stored config is whole).

    `sha256` (the manifest's `config_hash`), when given, must be the hash of the file's keys
    and values as stored (`config_hash` of the run's config): a file edited since the run is
    refused, while a key the experiment gained since (with its default) is filled in."""
    path = Path(folder) / "config.yaml"
    values = read_yaml(path, MAX_YAML, error=lambda problem: damaged(path, problem), follow=False)
    if not isinstance(values, dict):
        raise damaged(path, f"holds a {type(values).__name__}, not a mapping of config keys")
    if sha256 is not None and _hash(experiment.name, values) != sha256:
        raise damaged(path, "not the config the manifest's hash names")
    try:
        return experiment.make_config(None, values)
    except ConfigError as err:
        raise damaged(path, str(err).rstrip(".")) from None


def results_sha256(path: str | Path) -> str:
    """sha256 of a results.csv as stored (the manifest records it to detect later edits)."""
    digest, path = hashlib.sha256(), Path(path)
    with open_bounded(path, MAX_CSV, error=lambda p: damaged(path, p), follow=False) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_results(
    path: str | Path, required: tuple[str, ...] = ("metric", "value"), *, sha256: str | None = None
) -> pd.DataFrame:
    """A stored `results.csv`, exactly as every unit's rows were (float64 round trip), after
    checking it (`reading.check_csv`): at most MAX_CSV bytes, rows of at most a megabyte, every
    row with the header's number of fields, the `required` columns present, `value` numbers, `layer` integers,
    `at_floor` True/False; `sha256` (from the manifest) when given must match."""
    path = Path(path)
    check_csv(path, MAX_CSV, error=lambda problem: damaged(path, problem), follow=False)
    if sha256 is not None and results_sha256(path) != sha256:
        raise damaged(path, "changed since the run wrote it: its sha256 is not the manifest's")
    # pandas 3 parses floats exactly by default and deprecates the option that pandas 2 needs.
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""], **exact)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        problem = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise damaged(path, f"not a CSV table: {problem}") from None
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise damaged(path, f"no column(s) {missing}; it has {list(frame.columns)[:12]}")
    if frame.empty:
        raise damaged(path, "a header and no rows")
    _check_column(path, frame, "value", lambda c: pd.api.types.is_numeric_dtype(c), "numbers")
    _check_column(path, frame, "layer", _integers, "whole numbers")
    _check_column(path, frame, "at_floor", _flags, "True or False")
    return frame


def _flags(column: pd.Series) -> bool:
    return pd.api.types.is_bool_dtype(column) or column.dropna().isin([True, False]).all()


def _integers(column: pd.Series) -> bool:
    return pd.api.types.is_integer_dtype(column) or (
        pd.api.types.is_float_dtype(column) and bool((column.dropna() % 1 == 0).all())
    )


def _check_column(path: Path, frame: pd.DataFrame, name: str, ok, what: str) -> None:
    if name not in frame.columns or ok(frame[name]):
        return
    as_number = pd.to_numeric(frame[name], errors="coerce")
    column = frame[name]
    bad = column[as_number.isna() & column.notna()] if what != "True or False" else column.iloc[:0]
    first = bad.index[0] if len(bad) else frame.index[0]
    raise damaged(
        path, f"column {name!r} should hold {what}; line {first + 2} has {frame[name][first]!r}"
    )


def folder_kind(folder: Path) -> str | None:
    """What wrote a folder: 'run', 'simulate', 'probe', ... (its marker, or for a run folder
    of an older version its manifest), or None for a folder that is not ours."""
    marker = read_marker(folder)
    if marker is not None:
        return str(marker.get("command"))
    manifest = folder / "manifest.json"
    return "run" if manifest.is_file() and not manifest.is_symlink() else None


__all__ = [
    "ClaimRecord",
    "DamagedFileError",
    "Manifest",
    "config_hash",
    "damaged",
    "folder_kind",
    "read_claims",
    "read_config",
    "read_manifest",
    "read_results",
    "results_sha256",
]
