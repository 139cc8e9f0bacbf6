"""Parallel speed: a worker imports only the experiment it runs, `run all` puts the units of every
experiment on one set of workers with no barrier between experiments, and the units expected
to take longest start first."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_experiment import TINY

from rankcollapse import experiments
from rankcollapse.experiments import _registry
from rankcollapse.runner import backends, execute_all, plan, run_experiment
from rankcollapse.runner import run as run_module

WORKER = """
import json, pickle, sys
call_unit, run_unit, config, unit = pickle.loads(sys.stdin.buffer.read())
rows, seconds, where = call_unit(run_unit, config, unit)
print(json.dumps({"rows": len(rows), "modules": sorted(sys.modules)}))
"""


@pytest.mark.slow
def test_a_worker_running_a_toy_collapse_unit_imports_no_real_model_code():
    exp = experiments.get_experiment("toy-collapse")
    config = exp.make_config("quick")
    # what a process-pool worker receives, unpickled in a fresh interpreter as spawn does
    payload = pickle.dumps((backends.call_unit, exp.run_unit, config, exp.units(config)[0]))
    done = subprocess.run(
        [sys.executable, "-c", WORKER], input=payload, capture_output=True, check=True
    )
    seen = json.loads(done.stdout)
    assert seen["rows"] > 0  # the unit ran
    modules = set(seen["modules"])
    assert "rankcollapse.experiments.toy_collapse" in modules
    assert not {"transformers", "rankcollapse.hf", "rankcollapse.tasks"} & modules
    others = {f"rankcollapse.experiments.{m}" for m in experiments.MODULES.values()}
    assert others & modules == {"rankcollapse.experiments.toy_collapse"}


def test_every_experiment_module_is_declared_and_registers_its_declared_name():
    folder = Path(experiments.__file__).parent
    # every public module but the decision rule (`verdicts`) is an experiment
    on_disk = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_")} - {"verdicts"}
    assert set(experiments.MODULES.values()) == on_disk
    for name, module in experiments.MODULES.items():
        exp = experiments.get_experiment(name)
        assert exp.name == name
        assert exp.run_unit.__module__ == f"rankcollapse.experiments.{module}"


def test_a_declared_experiment_is_listed_before_and_imported_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "lazy_demo.py").write_text(
        "import dataclasses\nfrom tiny_experiment import TINY\n"
        "from rankcollapse.experiments import register\n"
        "register(dataclasses.replace(TINY, name='lazy-demo'))\n"
    )
    (tmp_path / "lazy_silent.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_registry, "_REGISTRY", {})
    _registry.declare("lazy-demo", "lazy_demo")
    _registry.declare("lazy-silent", "lazy_silent")
    assert _registry.experiment_names() == ["lazy-demo", "lazy-silent"]
    assert "lazy_demo" not in sys.modules
    assert _registry.get_experiment("lazy-demo").name == "lazy-demo"
    assert "lazy_demo" in sys.modules
    with pytest.raises(RuntimeError, match="module lazy_silent does not register.*'lazy-silent'"):
        _registry.get_experiment("lazy-silent")
    for module in ("lazy_demo", "lazy_silent"):
        sys.modules.pop(module)
    _registry._IMPORTED.pop("lazy-demo")


@pytest.mark.slow
def test_run_all_has_no_barrier_between_experiments(tmp_path):
    """Experiment a's second unit waits until a unit of experiment b is stored: with one pool
    per experiment (a barrier between them) it would time out."""
    logs = {name: tmp_path / f"log-{name}" for name in ("a", "b")}
    for folder in logs.values():
        folder.mkdir()
    (logs["a"] / "wait-0-1").write_text(f"{tmp_path / 'b' / 'units'} 1")
    plans = [
        plan(dataclasses.replace(TINY, name=name), overrides={"items": 1, "log_dir": str(log)},
             out=tmp_path / name)
        for name, log in logs.items()
    ]  # fmt: skip
    seen = []
    runs = execute_all(plans, jobs=2, progress=lambda *a: seen.append(a))
    assert [r.n_computed for r in runs] == [2, 2]
    assert ("b", 1, 2) in seen[: seen.index(("a", 2, 2))]  # b stored a unit before a ended
    for r in runs:
        assert (r.out_dir / "report.html").is_file()


def test_units_expected_to_take_longest_start_first(tmp_path, monkeypatch):
    """Times of an earlier run of the same experiment and preset (another config: other seeds,
    which cost nothing) order the units of every experiment together; units of unknown time go
    first, in list order."""
    slow = dataclasses.replace(TINY, name="slow")
    earlier = run_experiment(slow, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "x" / "0")
    manifest = json.loads((earlier.out_dir / "manifest.json").read_text())
    for entry in manifest["units_where"]:  # as if item 1 took longest, then item 2
        entry["seconds"] = {0: 1.0, 1: 30.0, 2: 5.0}[entry["unit"]["item"]]
    (earlier.out_dir / "manifest.json").write_text(json.dumps(manifest))

    order: list[dict] = []

    def record(backend, tasks, finished, jobs, address=None):
        for i, t in enumerate(tasks):
            order.append(t.unit)
            if follow_up := finished(i, *backends.call_unit(t.run_unit, t.config, t.unit)):
                follow_up.run_here()  # the report, as every backend builds it

    monkeypatch.setattr(run_module, "run_units", record)
    overrides = {"log_dir": str(tmp_path), "seeds": [7]}
    plans = [
        plan(TINY, overrides=overrides, out=tmp_path / "new-tiny"),  # no earlier run: unknown
        plan(slow, overrides=overrides, out=tmp_path / "x" / "1"),
    ]
    execute_all(plans, jobs=2)
    assert order == [
        {"item": i, "seed": 7}
        for i in (0, 1, 2)  # tiny, unknown, list order
    ] + [{"item": i, "seed": 7} for i in (1, 2, 0)]  # slow, longest first
    order.clear()
    for p in plans:
        for f in (p.out_dir / "units").glob("*.json"):
            f.unlink()
    execute_all(plans, jobs=1)  # one worker: every experiment in list order
    assert [u["item"] for u in order] == [0, 1, 2, 0, 1, 2]
