"""The runner: outputs on disk, config resolution and hashing, resume, corruption, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from tiny_experiment import TINY

from rankcollapse.errors import ConfigError, OutputError, UnitError
from rankcollapse.experiments import _registry, get_experiment
from rankcollapse.runner import parse_overrides, plan, run_all, run_experiment


def calls(log_dir: Path) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


def run_tiny(tmp_path: Path, **kwargs):
    overrides = {"log_dir": str(tmp_path), **kwargs.pop("overrides", {})}
    return run_experiment(
        TINY, overrides=overrides, out=kwargs.pop("out", tmp_path / "run"), **kwargs
    )


def test_a_run_writes_config_manifest_results_claims_figures_and_report(tmp_path):
    result = run_tiny(tmp_path)
    out = tmp_path / "run"
    for name in ("config.yaml", "manifest.json", "results.csv", "claims.json", "report.html"):
        assert (out / name).is_file(), name
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "res-vs-layer.png",
        "res-vs-layer.svg",
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config_hash"] == result.config_hash
    assert manifest["seeds"] == [0, 1]
    assert manifest["status"] == "complete" and manifest["finished"] >= manifest["started"]
    assert {"torch", "pandas", "rankcollapse"} <= set(manifest["packages"])
    assert yaml.safe_load((out / "config.yaml").read_text())["net"] == {"depth": 3, "norm": "none"}
    claims = json.loads((out / "claims.json").read_text())
    assert [(c["id"], c["passed"]) for c in claims] == [("positive", True), ("impossible", False)]
    assert claims[0]["measured"] == pytest.approx(result.results["value"].mean())  # every layer


def test_stored_results_equal_the_units_rows_exactly(tmp_path):
    result = run_tiny(tmp_path)
    config = result.config
    direct = pd.concat([TINY.run_unit(config, u) for u in TINY.units(config)], ignore_index=True)
    pd.testing.assert_frame_equal(result.results, direct, check_exact=True)
    assert len(result.results) == 3 * 2 * 4  # items x seeds x (depth + 1)


def test_default_out_dir_is_results_name_short_config_hash(tmp_path):
    p = plan(TINY, overrides={"log_dir": str(tmp_path)}, results_root=tmp_path / "results")
    assert p.out_dir == tmp_path / "results" / "tiny" / p.config_hash[:10]
    same = plan(TINY, overrides={"log_dir": str(tmp_path)}, results_root=tmp_path / "results")
    other = plan(TINY, overrides={"log_dir": str(tmp_path), "net.depth": 2})
    assert same.config_hash == p.config_hash != other.config_hash


def test_rerun_with_the_same_config_reuses_every_unit(tmp_path):
    run_tiny(tmp_path)
    again = run_tiny(tmp_path)
    assert (again.n_cached, again.n_computed) == (6, 0)
    assert len(calls(tmp_path)) == 6


def test_a_changed_config_never_reuses_stale_units_even_in_the_same_folder(tmp_path):
    run_tiny(tmp_path)
    folder = tmp_path / "run"
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}
    with pytest.raises(OutputError, match="holds a run of another config.*pass another folder"):
        run_tiny(tmp_path, overrides={"net.depth": 2})
    after = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != ".lock"}
    assert after == before  # refused, never mixed: the first run's files as they were
    changed = run_tiny(tmp_path, overrides={"net.depth": 2}, out=tmp_path / "other")
    assert (changed.n_cached, changed.n_computed) == (0, 6)
    assert changed.results["layer"].max() == 2


def test_resume_after_a_unit_dies_midway_recomputes_only_unfinished_units(tmp_path):
    (tmp_path / "fail-1").touch()
    with pytest.raises(  # one full stop after the unit's message, which has its own
        UnitError, match=r'tiny unit \{"item":1,"seed":0\} failed.*crash in item 1\. 2 of 6 units'
    ):
        run_tiny(tmp_path)
    assert calls(tmp_path) == ["0-0", "0-1", "1-0"]  # units run in order; 1-0 died
    (tmp_path / "fail-1").unlink()
    resumed = run_tiny(tmp_path)
    assert (resumed.n_cached, resumed.n_computed) == (2, 4)
    assert calls(tmp_path)[3:] == ["1-0", "1-1", "2-0", "2-1"]  # no finished unit twice
    (tmp_path / "fresh").mkdir()
    fresh = run_tiny(tmp_path / "fresh")
    pd.testing.assert_frame_equal(resumed.results, fresh.results)


def test_a_corrupt_or_truncated_unit_file_is_detected_and_recomputed(tmp_path):
    first = run_tiny(tmp_path)
    files = sorted((tmp_path / "run" / "units").iterdir())
    files[0].write_bytes(files[0].read_bytes()[:-7])  # truncated
    data = bytearray(files[1].read_bytes())
    data[-3] ^= 0xFF  # one flipped byte
    files[1].write_bytes(bytes(data))
    again = run_tiny(tmp_path)
    assert (again.n_corrupt, again.n_cached, again.n_computed) == (2, 4, 2)
    pd.testing.assert_frame_equal(again.results, first.results)


def test_no_temporary_files_are_left_behind_even_after_a_kill_mid_write(tmp_path):
    run_tiny(tmp_path)
    (tmp_path / "run" / "units" / ".abc.json.123.tmp").write_bytes(b"half a unit")
    run_tiny(tmp_path)
    assert not [p for p in (tmp_path / "run").rglob("*") if p.name.endswith(".tmp")]


def test_overrides_are_yaml_values_with_dotted_keys():
    assert parse_overrides(["items=5", "seeds=[3, 4]", "net.norm=post", "x=1e-3", "y=true"]) == {
        "items": 5,
        "seeds": [3, 4],
        "net.norm": "post",
        "x": 0.001,
        "y": True,
    }


def test_an_override_without_equals_sign_is_rejected_with_an_example_of_real_keys():
    with pytest.raises(ConfigError, match=r"--set expects key=value, got 'items'.*--set n_layers"):
        parse_overrides(["items"])
    keys = list(get_experiment("toy-collapse").config.model_fields)
    with pytest.raises(ConfigError, match=r"e\.g\. --set n_layers=VALUE; keys: n_layers, n_heads"):
        parse_overrides(["items"], keys)


def test_config_file_is_merged_over_the_preset_and_set_over_the_file(tmp_path):
    config_file = tmp_path / "c.yaml"
    config_file.write_text("items: 2\nnet:\n  depth: 5\n")
    p = plan(TINY, "paper", {"net.norm": "post"}, config_file)
    assert (p.config.items, p.config.seeds) == (2, [0, 1, 2])
    assert p.config.net.model_dump() == {"depth": 5, "norm": "post"}
    p = plan(TINY, "paper", {"items": 1}, config_file)
    assert p.config.items == 1


def test_a_typo_in_a_config_file_names_the_key_and_the_allowed_keys(tmp_path):
    config_file = tmp_path / "c.yaml"
    config_file.write_text("net:\n  dpeth: 5\n")
    with pytest.raises(
        ConfigError, match=r"no config key 'net.dpeth'.*'net.depth'.*net.depth, net.norm"
    ):
        plan(TINY, config_file=config_file)


def test_a_config_file_that_is_not_a_mapping_is_rejected(tmp_path):
    config_file = tmp_path / "c.yaml"
    config_file.write_text("- items\n")
    with pytest.raises(ConfigError, match="holds a list; it must be a mapping"):
        plan(TINY, config_file=config_file)


def test_invalid_values_fail_before_any_unit_runs(tmp_path):
    with pytest.raises(ConfigError, match=r"net.depth: .*less than or equal to 8 \(got 99\)"):
        run_tiny(tmp_path, overrides={"net.depth": 99})
    assert calls(tmp_path) == []
    assert not (tmp_path / "run").exists()


def test_jobs_below_one_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="jobs is 0; it must be at least 1"):
        run_tiny(tmp_path, jobs=0)


def test_a_unit_that_returns_no_metric_value_columns_is_named(tmp_path):
    broken = dataclasses.replace(TINY, run_unit=lambda c, u: pd.DataFrame({"x": [1]}))
    with pytest.raises(UnitError, match=r'tiny unit \{"item":0,"seed":0\} returned \[\'x\'\]'):
        run_experiment(broken, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")


def test_progress_reports_every_unit_and_starts_from_the_reused_ones(tmp_path):
    seen = []
    run_tiny(tmp_path, overrides={"items": 1}, progress=lambda *a: seen.append(a))
    assert seen == [("tiny", 0, 2), ("tiny", 1, 2), ("tiny", 2, 2)]
    seen.clear()
    run_tiny(tmp_path, overrides={"items": 1}, progress=lambda *a: seen.append(a))
    assert seen == [("tiny", 2, 2)]


def test_run_all_validates_every_config_before_running_any(tmp_path, monkeypatch):
    strict = dataclasses.replace(
        TINY, name="z-strict", presets={"quick": {"items": 99}, "paper": {}}
    )
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY, "z-strict": strict})
    with pytest.raises(ConfigError, match=r"invalid config for z-strict: items: .*\(got 99\)"):
        run_all(overrides={"log_dir": str(tmp_path)}, results_root=tmp_path / "res")
    assert calls(tmp_path) == []  # "tiny" comes first and is valid, yet did not run
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY})
    (result,) = run_all(overrides={"log_dir": str(tmp_path)}, results_root=tmp_path / "res")
    assert result.out_dir == tmp_path / "res" / "tiny" / result.config_hash[:10]
