"""Unit files are typed data: exact round trips, no code on read, damage and old formats named."""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import sys

import numpy as np
import pandas as pd
import pytest
from tiny_experiment import TINY

from rankcollapse.errors import UnitError
from rankcollapse.runner import run_experiment
from rankcollapse.runner._store import load_unit, save_unit

UNIT = {"item": 0, "seed": 1}


def mixed_rows() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    floats = np.concatenate([rng.standard_normal(4), [np.nan, np.inf, -np.inf, 5e-324, 1e308]])
    n = len(floats)
    return pd.DataFrame(
        {
            "model": pd.Series([f"m{i}" for i in range(n - 1)] + [None], dtype="str"),
            "layer": np.arange(n, dtype=np.int64),
            "small": np.arange(n, dtype=np.int32),
            "metric": ["res"] * n,
            "value": floats,
            "single": np.where(np.isfinite(floats), 1.5, floats).astype(np.float32) / 3,
            "at_floor": [True, False] * (n // 2) + [True],
            "mixed": pd.Series(["a", 1, 2.5, None, True, float("nan"), "b", 3, -0.0], dtype=object),
        }
    )


def test_every_column_type_round_trips_exactly_with_nan_and_infinities(tmp_path):
    rows = mixed_rows()
    save_unit(tmp_path / "u.json", UNIT, rows, 1.25, {"node": "n1", "device": "cpu"})
    (back, seconds, where), reason = load_unit(tmp_path / "u.json", UNIT)
    assert reason == "" and seconds == 1.25 and where == {"node": "n1", "device": "cpu"}
    pd.testing.assert_frame_equal(back, rows, check_exact=True)
    bits = back["value"].to_numpy().view(np.int64)
    assert (bits == rows["value"].to_numpy().view(np.int64)).all()  # bit for bit, NaN included
    assert math.copysign(1, back["mixed"][8]) == -1.0


def test_a_unit_file_is_plain_json_with_a_checksum_of_its_body(tmp_path):
    save_unit(tmp_path / "u.json", UNIT, mixed_rows(), 0.5)
    header, body = (tmp_path / "u.json").read_bytes().splitlines()
    assert json.loads(header) == {
        "format": "rankcollapse-unit",
        "version": 2,
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    assert json.loads(body)["unit"] == UNIT


def test_a_column_of_another_type_is_named_when_the_unit_is_stored(tmp_path):
    rows = pd.DataFrame({"metric": ["res"], "value": [1.0], "when": pd.to_datetime(["2024"])})
    with pytest.raises(UnitError, match=r"column 'when' of dtype datetime64.*astype\(str\)"):
        save_unit(tmp_path / "u.json", UNIT, rows, 0.5)


def deep_body() -> bytes:
    """A body nested 100,000 deep under a header with its true checksum."""
    line = b"[" * 100_000 + b"]" * 100_000
    header = {
        "format": "rankcollapse-unit",
        "version": 2,
        "sha256": hashlib.sha256(line).hexdigest(),
    }
    return json.dumps(header).encode() + b"\n" + line + b"\n"


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b[:-9], "checksum mismatch"),
        (lambda b: b.replace(b'"seconds":', b'"seconds" :'), "checksum mismatch"),
        (lambda b: b"", "not a unit file"),
        (lambda b: b.replace(b'"version": 2', b'"version": 3'), "version 3"),
        (lambda b: b"[" * 100_000 + b"]" * 100_000, "not a unit file"),
        (lambda b: deep_body(), "malformed columns (RecursionError"),
    ],
)
def test_damaged_files_read_as_missing_with_the_reason(tmp_path, damage, reason):
    save_unit(tmp_path / "u.json", UNIT, mixed_rows(), 0.5)
    (tmp_path / "u.json").write_bytes(damage((tmp_path / "u.json").read_bytes()))
    stored, why = load_unit(tmp_path / "u.json", UNIT)
    assert stored is None and reason in why


def test_a_file_of_another_unit_is_not_used(tmp_path):
    save_unit(tmp_path / "u.json", UNIT, mixed_rows(), 0.5)
    assert load_unit(tmp_path / "u.json", {"item": 9, "seed": 1}) == (None, "holds another unit")


class Payload:
    """Unpickling this runs a command that writes a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"{sys.executable} -c \"open('{self.marker}', 'w')\"",))


def test_a_planted_pickle_never_runs_and_its_unit_is_recomputed_and_reported(tmp_path):
    overrides = {"log_dir": str(tmp_path), "items": 2}
    first = run_experiment(TINY, overrides=overrides, out=tmp_path / "run")
    files = sorted((tmp_path / "run" / "units").glob("*.json"))
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Payload(marker))
    pickle.loads(pickle.dumps(Payload(tmp_path / "control")))  # the payload is real:
    assert (tmp_path / "control").exists()  # unpickling it does write its marker
    # a version 1 file (magic, valid sha256, pickle) under the new name, and one under the old
    files[0].write_bytes(
        b"rankcollapse-unit-v1\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    )
    files[1].unlink()
    files[1].with_suffix(".pkl").write_bytes(payload)
    again = run_experiment(TINY, overrides=overrides, out=tmp_path / "run")
    assert not marker.exists()
    assert (again.n_cached, again.n_computed, again.n_corrupt) == (2, 2, 2)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    reasons = {r["unit_file"]: r["reason"] for r in manifest["recomputed"]}
    assert reasons == {
        files[0].name: "not a unit file of this version (never executed, never unpickled)",
        files[1].with_suffix(".pkl").name: "older pickle format (never loaded)",
    }
    pd.testing.assert_frame_equal(again.results, first.results, check_exact=True)
    assert not files[1].with_suffix(".pkl").exists()


def test_a_resumed_run_writes_the_same_results_csv_bytes(tmp_path):
    overrides = {"log_dir": str(tmp_path)}
    run_experiment(TINY, overrides=overrides, out=tmp_path / "whole")
    (tmp_path / "fail-2").touch()
    with pytest.raises(UnitError):
        run_experiment(TINY, overrides=overrides, out=tmp_path / "resumed")
    (tmp_path / "fail-2").unlink()
    run_experiment(TINY, overrides=overrides, out=tmp_path / "resumed")
    for name in ("results.csv", "claims.json"):
        whole, resumed = (tmp_path / d / name for d in ("whole", "resumed"))
        assert whole.read_bytes() == resumed.read_bytes(), name
