"""`--dry-run`: the units, their count and an estimated time from stored units and a timed
sample within a time budget; nothing is written (no folder), nothing else runs."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time

import pytest
from tiny_experiment import TINY

from rankcollapse import cli, runner
from rankcollapse.experiments import _registry
from rankcollapse.runner import dry_run, makespan, plan, run_experiment, stored_dry_run


def calls(log_dir) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


def test_makespan_deals_units_in_order_to_the_first_free_worker():
    assert makespan([1.0] * 5, 1) == 5.0
    assert makespan([1.0] * 5, 2) == 3.0
    assert makespan([4.0, 1.0, 1.0, 1.0, 1.0], 2) == 4.0
    assert makespan([1.0, 1.0, 4.0], 2) == 5.0


def test_a_dry_run_times_units_covering_every_value_and_writes_nothing(tmp_path):
    (tmp_path / "slow").write_text("0.05")
    p = plan(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    estimate = dry_run(p, samples=2)
    assert calls(tmp_path) == ["0-0", "2-1"]  # every item and seed value: first and last unit
    assert estimate.source == ["sampled"] + ["estimated"] * 4 + ["sampled"]
    assert not p.out_dir.exists() and not estimate.lower_bound
    first, last = estimate.seconds[0], estimate.seconds[5]
    # item 0 seed 1 costs what item 0 did (the seed is no cost factor); item 1, which no
    # sampled unit has, costs what the sampled unit sharing its seed did
    expected = [first, first, first, last, last, last]
    assert estimate.seconds == pytest.approx(expected) and min(first, last) >= 0.05
    assert estimate.unseen == ["item=1"]
    assert estimate.wall_seconds(1) == pytest.approx(sum(expected))  # sampled units run again
    longest_first = sorted(expected, reverse=True)  # the order the real run starts them in
    assert estimate.wall_seconds(2, startup=1.5) == pytest.approx(1.5 + makespan(longest_first, 2))
    real = run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    assert (real.n_cached, real.n_computed) == (0, 6)


def test_a_sampled_unit_past_the_budget_is_stopped_and_its_estimates_are_lower_bounds(tmp_path):
    (tmp_path / "slow").write_text("600")
    p = plan(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    start = time.perf_counter()
    estimate = dry_run(p, samples=2, budget=0.5)
    spent = time.perf_counter() - start
    assert calls(tmp_path) == ["0-0"]  # the budget was spent on the first: no second sample
    assert estimate.source == ["stopped"] + ["estimated"] * 5 and estimate.lower_bound
    # stopped once the whole dry run's budget was spent, not at 600 s; the unit's own time so
    # far is the budget less what the dry run did before it started (0.496 s once, on a
    # loaded machine), so it is bounded by the dry run's time, not by the budget
    assert 0.5 <= spent < 60 and not p.out_dir.exists()
    assert spent / 2 <= estimate.seconds[0] <= spent
    assert estimate.seconds == pytest.approx([estimate.seconds[0]] * 6)


def test_a_dry_run_uses_stored_unit_times_before_sampling(tmp_path):
    first = run_experiment(
        TINY, overrides={"log_dir": str(tmp_path), "items": 1}, out=tmp_path / "r"
    )
    p = plan(TINY, overrides={"log_dir": str(tmp_path), "items": 1}, out=tmp_path / "r")
    estimate = dry_run(p, samples=2)
    assert estimate.source == ["stored", "stored"] and len(calls(tmp_path)) == 2
    assert estimate.remaining == [] and estimate.wall_seconds(2) == 0.0
    assert first.n_computed == 2


def test_a_stored_dry_run_reads_stored_unit_times_and_writes_nothing(tmp_path):
    (tmp_path / "slow").write_text("0.05")
    p = plan(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    assert all(math.isnan(s) for s in stored_dry_run(p).seconds)  # nothing stored
    run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    for path in runner.run.unit_paths(p)[1:5]:  # as if a run was killed after two units
        path.unlink()
    (p.out_dir / "manifest.json").unlink()  # its unit times are not the ones tested here
    before = sorted(f.name for f in p.out_dir.rglob("*"))
    estimate = stored_dry_run(p)
    assert estimate.source == ["stored"] + ["estimated"] * 4 + ["stored"]
    first, last = estimate.seconds[0], estimate.seconds[5]
    assert estimate.seconds[1:5] == pytest.approx([first, first, last, last])
    assert sorted(f.name for f in p.out_dir.rglob("*")) == before
    assert len(calls(tmp_path)) == 6


def test_run_dry_run_prints_units_count_and_estimates(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY})
    # spawning workers to measure their start-up takes seconds; the measurement is not tested
    monkeypatch.setattr(runner, "startup_seconds", lambda backend, jobs, address: 0.25 * (jobs - 1))
    argv = ["run", "tiny", "--preset", "paper", "--set", f"log_dir={tmp_path}", "--dry-run"]
    argv += ["--out", str(tmp_path / "run"), "--sample-units", "1"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert '{"item":9,"seed":2}' in out and "30 (0, 1)" in out
    assert "process, 1 worker" in out and "process, 2 workers" in out
    assert "start-up (measured): process x1: 0.0 s, process x2: 0.2 s" in out
    assert "tiny: 30 units (0 stored, 1 sampled);" in out
    assert calls(tmp_path) == ["0-0"]  # one sampled unit, nothing else
    assert not (tmp_path / "run").exists()  # no folder left behind


def test_run_help_shows_every_flag_with_its_default(capsys, monkeypatch):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--backend {process,ray}", "--address", "--dry-run", "--sample-units", "--jobs"):
        assert flag in text
    assert "(default: process)" in text and "(default: 2)" in text
    assert "(default: one per core; one on a GPU)" in text


def test_address_without_ray_backend_is_rejected(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY})
    assert cli.main(["run", "tiny", "--address", "h:6379", "--out", str(tmp_path)]) == 2
    assert "--address joins a Ray cluster; add --backend ray." in capsys.readouterr().err


def test_run_all_dry_run_sums_the_experiments(tmp_path, capsys, monkeypatch):
    other = dataclasses.replace(TINY, name="tiny-b")
    monkeypatch.setattr(_registry, "_REGISTRY", {"tiny": TINY, "tiny-b": other})
    monkeypatch.setattr(runner, "startup_seconds", lambda backend, jobs, address: 0.0)
    argv = ["run", "all", "--set", f"log_dir={tmp_path}", "--out", str(tmp_path / "res")]
    assert cli.main([*argv, "--dry-run", "--sample-units", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if "│" in line]
    assert [r.split("│")[1].strip() for r in rows] == ["tiny", "tiny-b", "all"]
    assert rows[-1].split("│")[2].strip() == "12"
    # a line per experiment as soon as it is timed, before the table
    assert [line.split(":")[0] for line in lines[:2]] == ["tiny", "tiny-b"]
    assert all("6 units (0 stored, 1 sampled)" in line for line in lines[:2])
    assert calls(tmp_path) == ["0-0", "0-0"]  # one sampled unit per experiment
    assert not (tmp_path / "res").exists()


def test_a_dry_run_of_every_quick_experiment_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """The real registry, the quick preset, no unit timed: a line per experiment, no folder."""
    from rankcollapse.experiments import MODULES

    monkeypatch.setattr(runner, "startup_seconds", lambda backend, jobs, address: 0.0)
    argv = ["run", "all", "--preset", "quick", "--out", str(tmp_path / "res"), "--dry-run"]
    assert cli.main([*argv, "--sample-units", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert {line.split(":")[0] for line in lines[: len(MODULES)]} == set(MODULES)
    assert list(tmp_path.iterdir()) == []


def test_unseen_names_combinations_no_timed_unit_has_even_when_each_value_was_timed():
    units = [
        {"part": "a", "d": 1, "seed": 0},
        {"part": "b", "d": 2, "seed": 0},
        {"part": "a", "d": 2, "seed": 0},  # part a and d 2 were each timed, never together
        {"part": "a", "d": 1, "seed": 1},  # another seed of a timed unit: not unseen
    ]
    source = ["stored", "sampled", "estimated", "estimated"]
    estimate = runner.DryRun("demo", units, [1.0, 2.0, 1.5, 1.0], source)
    assert estimate.unseen == ['part="a", d=2']


def test_a_unit_of_an_unrun_combination_is_estimated_as_a_product_of_its_values_costs(
    tmp_path,
):
    """The deep model ran under one mask only; under another it costs the deep model's time
    times what that mask costs in the models that ran under both (wu2024-masks at paper size:
    the nearest-units mean put a deep unit of 688 s at 254 s under every other mask)."""
    units = [{"model": m, "mask": k} for m in ("toy", "base", "deep") for k in ("a", "b")]
    source = ["stored", "stored", "stored", "stored", "sampled", "estimated"]
    p = dataclasses.replace(plan(TINY, out=tmp_path / "r"), units=units)
    estimate = runner.estimate._estimated(p, [10.0, 20.0, 60.0, 120.0, 700.0, 0.0], source)
    assert estimate.seconds[5] == pytest.approx(1400.0)
    assert estimate.unseen == ['model="deep", mask="b"']


def test_a_dry_run_estimates_from_earlier_runs_beside_its_folder(tmp_path):
    """An earlier run of the same experiment and preset with other seeds (which cost nothing)
    gives each item's time; nothing needs to be sampled."""
    (tmp_path / "slow").write_text("0.05")
    overrides = {"log_dir": str(tmp_path), "items": 2}
    earlier = run_experiment(TINY, overrides={**overrides, "seeds": [0]}, out=tmp_path / "x" / "0")
    manifest = json.loads((earlier.out_dir / "manifest.json").read_text())
    times = [entry["seconds"] for entry in manifest["units_where"]]
    estimate = dry_run(
        plan(TINY, overrides={**overrides, "seeds": [1]}, out=tmp_path / "x" / "1"), 0
    )
    assert estimate.source == ["estimated"] * 2
    assert estimate.seconds == pytest.approx(times) and len(calls(tmp_path)) == 2


def test_a_deadline_never_cuts_an_import_halfway(tmp_path, monkeypatch):
    """A unit stopped while it imports would leave a half-made module to every later unit of
    the dry run: the stop waits for the import to end."""
    (tmp_path / "slow_module_for_deadline.py").write_text(
        "import time\ntime.sleep(1.0)\nDONE = 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_module_for_deadline", raising=False)
    start = time.perf_counter()
    with pytest.raises(runner.estimate._OverBudget), runner.estimate._deadline(0.2):
        import slow_module_for_deadline  # noqa: F401

        time.sleep(60)
    assert sys.modules["slow_module_for_deadline"].DONE == 1
    assert 1.0 <= time.perf_counter() - start < 30
    sys.modules.pop("slow_module_for_deadline")
