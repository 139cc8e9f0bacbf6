"""`jobs > 1`: units run in spawned workers and the results do not depend on `jobs`."""

from __future__ import annotations

import os
import pickle

import pandas as pd
import pytest
from tiny_experiment import TINY, sleeping_unit

from rankcollapse.errors import UnitError
from rankcollapse.experiments import experiment_names
from rankcollapse.process import cpu_cores
from rankcollapse.runner import UNIT_THREADS, plan, run_experiment
from rankcollapse.runner.backends import (
    FollowUp,
    Task,
    call_unit,
    default_jobs,
    gpu_share,
    run_units,
)


@pytest.mark.slow
def test_jobs_1_and_jobs_2_give_identical_results_and_claims(tmp_path):
    overrides = {"log_dir": str(tmp_path)}
    one = run_experiment(TINY, overrides=overrides, out=tmp_path / "one", jobs=1)
    # the last unit waits until the four that finished before it started are on disk
    (tmp_path / "wait-2-1").write_text(f"{tmp_path / 'two' / 'units'} 4")
    seen = []
    two = run_experiment(
        TINY, overrides=overrides, out=tmp_path / "two", jobs=2, progress=lambda *a: seen.append(a)
    )
    assert two.n_computed == 6
    assert [done for _, done, _ in seen] == list(range(7))  # each unit stored as it finishes
    pd.testing.assert_frame_equal(one.results, two.results, check_exact=True)
    assert one.claims == two.claims
    assert (tmp_path / "one" / "results.csv").read_bytes() == (
        tmp_path / "two" / "results.csv"
    ).read_bytes()
    assert two.manifest["torch_threads"] == UNIT_THREADS and two.manifest["jobs"] == 2


@pytest.mark.slow
def test_a_failing_unit_in_a_worker_is_named_and_finished_units_are_kept(tmp_path):
    (tmp_path / "fail-2").touch()
    overrides = {"log_dir": str(tmp_path)}
    with pytest.raises(
        UnitError,
        match=r'tiny unit \{"item":2,"seed":\d\} failed.*run again: the stored units are reused',
    ):
        run_experiment(TINY, overrides=overrides, out=tmp_path / "run", jobs=2)
    (tmp_path / "fail-2").unlink()
    resumed = run_experiment(TINY, overrides=overrides, out=tmp_path / "run", jobs=1)
    assert resumed.n_cached >= 4 - 1  # items 0 and 1 finished, except any cancelled in flight
    assert resumed.n_cached + resumed.n_computed == 6


def _subnormal_survives(config: object, unit: dict) -> pd.DataFrame:
    """1e-40 is subnormal in float32: flushed to 0 when subnormals are flushed."""
    import torch

    kept = bool((torch.tensor([1e-40]) * 2.0).item() != 0.0)
    return pd.DataFrame({"metric": ["kept"], "value": [float(kept)]})


def test_a_unit_runs_with_subnormals_flushed_and_the_process_gets_its_default_back():
    """Subnormal arithmetic is slow on CPUs (a 128-layer pure-attention BERT ran 18 x slower);
    its values are flagged at the floor anyway. Every backend runs units through call_unit."""
    rows, _, _ = call_unit(_subnormal_survives, None, {})
    assert rows["value"].tolist() == [0.0]
    assert _subnormal_survives(None, {})["value"].tolist() == [1.0]


class _OnDevice:
    """A config whose units run on `device` (no accelerator is touched: the unit is a stub)."""

    def __init__(self, device: str) -> None:
        self.device = device


def _threads(config: object, unit: dict) -> int:
    import torch

    return torch.get_num_threads()


def test_a_cpu_unit_runs_on_one_thread_and_an_accelerator_unit_keeps_the_processes():
    import torch

    before = torch.get_num_threads()
    assert UNIT_THREADS == 1
    assert call_unit(_threads, _OnDevice("cpu"), {}, threads=UNIT_THREADS)[0] == 1
    # set_num_threads and flushing are CPU tricks: a unit on a GPU runs as the process is
    assert call_unit(_threads, _OnDevice("cuda:0"), {}, threads=7)[0] == before
    assert torch.get_num_threads() == before


def test_default_jobs_fill_the_cores_and_a_gpu_is_shared_only_when_asked():
    assert default_jobs([_OnDevice("cpu"), _OnDevice("cpu")]) == cpu_cores()
    assert default_jobs([_OnDevice("cpu"), _OnDevice("cuda")]) == 1
    assert gpu_share(_OnDevice("cuda"), 4) == 0.25
    assert gpu_share(_OnDevice("cpu"), 4) == gpu_share(_OnDevice("mps"), 4) == 0.0


TRAINING = {"steps": 100, "every": 50, "seeds": [0]}  # training-dynamics, 4 short units


@pytest.mark.slow
@pytest.mark.skipif(cpu_cores() < 2, reason="one core: a unit's thread count cannot vary")
def test_a_trained_units_numbers_depend_on_its_thread_count():
    """Why every CPU unit gets one thread whatever --jobs is: the same unit on 2 threads."""
    quick = plan("training-dynamics", "quick", overrides=TRAINING)
    rows = [
        call_unit(quick.experiment.run_unit, quick.config, quick.units[0], threads)[0]
        for threads in (1, 2)
    ]
    assert (rows[0]["value"] - rows[1]["value"]).abs().max() > 0


@pytest.mark.slow
def test_a_real_training_experiment_gives_the_same_bytes_with_1_and_2_jobs(tmp_path):
    one = run_experiment("training-dynamics", overrides=TRAINING, out=tmp_path / "one", jobs=1)
    two = run_experiment("training-dynamics", overrides=TRAINING, out=tmp_path / "two", jobs=2)
    assert two.n_computed == 4
    for name in ("results.csv", "claims.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert one.manifest["torch_threads"] == two.manifest["torch_threads"] == UNIT_THREADS


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiments_units_can_go_to_worker_processes(name):
    """What `--jobs N` sends each worker pickles: the unit function and the preset's config
    (a config field of a class made at run time would not, and every default run would fail)."""
    quick = plan(name, "quick")
    back = pickle.loads(pickle.dumps((quick.experiment.run_unit, quick.config)))
    assert back[1] == quick.config


def test_a_follow_up_runs_on_a_worker_before_the_units_not_yet_started():
    """An experiment's report (a follow-up of its last unit) is built beside the other units,
    not after them all, nor in the driver while workers wait."""
    events = []

    def finished(i, rows, seconds, where):
        events.append(("unit", i))
        return FollowUp(os.getpid, lambda pid: events.append(("report", pid))) if i == 0 else None

    tasks = [Task(sleeping_unit, None, {"seconds": 0.05 if i == 0 else 0.5}) for i in range(5)]
    run_units("process", tasks, finished, jobs=2)
    report = next(event for event in events if event[0] == "report")
    assert report[1] != os.getpid()  # on a worker
    assert events.index(report) < events.index(("unit", 3))  # before units not yet started
    assert sorted(i for kind, i in events if kind == "unit") == [0, 1, 2, 3, 4]


def test_one_process_runs_a_follow_up_where_it_is():
    events = []

    def finished(i, rows, seconds, where):
        events.append(("unit", i))
        return FollowUp(os.getpid, lambda pid: events.append(("report", pid))) if i == 0 else None

    run_units("process", [Task(sleeping_unit, None, {"seconds": 0.0})] * 2, finished, jobs=1)
    assert events == [("unit", 0), ("report", os.getpid()), ("unit", 1)]
