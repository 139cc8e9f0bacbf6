"""`backend="ray"`: units as Ray tasks on a local instance (2 CPUs, started once for this
module), files byte-identical to jobs=1, resume across backends, failures and Ctrl-C."""

from __future__ import annotations

import builtins
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from tiny_experiment import TINY

from rankcollapse.errors import ConfigError, UnitError
from rankcollapse.process import cpu_cores
from rankcollapse.runner import run_experiment, session

SAME_FILES = ("results.csv", "claims.json", "figures/res-vs-layer.png")
LOADED = 600  # s: Ray starting workers on a 2-core machine at a load of 10 takes minutes


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    with session("ray", 2):
        yield


def calls(log_dir) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_ray_files_equal_jobs_1_and_ray_resumes_a_local_run(tmp_path, ray_cluster):
    overrides = {"log_dir": str(tmp_path)}
    one = run_experiment(TINY, overrides=overrides, out=tmp_path / "one", jobs=1)
    (tmp_path / "fail-2").touch()
    with pytest.raises(UnitError):
        run_experiment(TINY, overrides=overrides, out=tmp_path / "ray", jobs=1)
    (tmp_path / "fail-2").unlink()
    seen, before = [], len(calls(tmp_path))
    ray = run_experiment(
        TINY,
        overrides=overrides,
        out=tmp_path / "ray",
        jobs=2,
        backend="ray",
        progress=lambda *a: seen.append(a[1]),
    )
    assert (ray.n_cached, ray.n_computed) == (4, 2)
    assert seen == [4, 5, 6]  # counted as units finish
    assert sorted(calls(tmp_path)[before:]) == ["2-0", "2-1"]  # only the units not stored
    for name in SAME_FILES:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "ray" / name).read_bytes()
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    where = {json.dumps(w["unit"]): w for w in manifest["units_where"]}
    assert where['{"item": 2, "seed": 0}']["backend"] == "ray"
    assert where['{"item": 0, "seed": 0}']["backend"] == "process"
    assert all(w["node"] and w["device"] == "cpu" for w in where.values())
    pd.testing.assert_frame_equal(one.results, ray.results, check_exact=True)


@pytest.mark.slow
def test_ctrl_c_cancels_ray_tasks_and_a_local_rerun_reuses_the_finished(tmp_path, ray_cluster):
    overrides = {"log_dir": str(tmp_path), "items": 4}
    (tmp_path / "slow").write_text("0.3")

    def interrupt(name, done, total):
        if done == 2:  # Ctrl-C as the main thread sees it; a real SIGINT's handler may run
            raise KeyboardInterrupt  # inside hypothesis's gc callback, which swallows it

    with pytest.raises(KeyboardInterrupt):
        run_experiment(
            TINY,
            overrides=overrides,
            out=tmp_path / "run",
            jobs=2,
            backend="ray",
            progress=interrupt,
        )
    stored = len(list((tmp_path / "run" / "units").glob("*.json")))
    assert 2 <= stored < 8 and not list((tmp_path / "run").rglob(".*.tmp"))
    before = len(calls(tmp_path))
    (tmp_path / "slow").unlink()
    resumed = run_experiment(TINY, overrides=overrides, out=tmp_path / "run", jobs=1)
    assert (resumed.n_cached, resumed.n_computed) == (stored, 8 - stored)
    assert len(calls(tmp_path)) - before == 8 - stored  # no finished unit ran again


@pytest.mark.slow
def test_a_failing_ray_unit_is_named_with_its_traceback(tmp_path, ray_cluster):
    (tmp_path / "fail-1").touch()
    with pytest.raises(UnitError) as caught:
        run_experiment(
            TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run", jobs=2, backend="ray"
        )
    message = str(caught.value)
    assert 'tiny unit {"item":1,"seed":' in message and "simulated crash in item 1" in message
    assert "Traceback" not in message and "the stored units are reused" in message
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "Traceback (most recent" in manifest["traceback"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", "ray"])
def test_a_worker_that_dies_is_named_and_the_finished_units_are_kept(tmp_path, backend, request):
    if backend == "ray":
        request.getfixturevalue("ray_cluster")
    (tmp_path / "die-2").touch()  # SIGKILL inside the worker, as the kernel does on OOM
    with pytest.raises(UnitError) as caught:
        run_experiment(
            TINY,
            overrides={"log_dir": str(tmp_path)},
            out=tmp_path / "run",
            jobs=2,
            backend=backend,
        )
    message = str(caught.value)
    assert "died before it returned" in message and "rerun the same command" in message
    if backend == "ray":  # a pool only knows its process died, not which of its units did it
        assert 'tiny unit {"item":2,"seed":' in message
    stored = len(list((tmp_path / "run" / "units").glob("*.json")))
    (tmp_path / "die-2").unlink()
    resumed = run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    assert stored >= 1 and (resumed.n_cached, resumed.n_computed) == (stored, 6 - stored)


def test_ray_backend_without_ray_names_the_extra(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    extra = r'--backend ray needs the ray extra.*pip install -e "\.\[ray\]"'
    with pytest.raises(ConfigError, match=extra):
        run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, backend="ray", jobs=2)
    assert not (tmp_path / "calls.log").exists()


def test_an_unknown_backend_is_rejected_with_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="backend is 'dask'; choose one of process, ray"):
        run_experiment(TINY, overrides={"log_dir": str(tmp_path)}, backend="dask")


DRIVER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal: a job started in
# the background by a non-interactive shell (as test runners may be) inherits SIGINT ignored
sys.path.insert(0, {runner_tests!r})
from tiny_experiment import TINY
from rankcollapse import cli
from rankcollapse.experiments import _registry
_registry._REGISTRY.clear()
_registry._REGISTRY["tiny"] = TINY
sys.exit(cli.main(["run", "tiny", "--set", "log_dir={log}", "--backend", "ray", "--jobs", "2",
                   "--out", {out!r}]))
"""


@pytest.mark.slow
def test_a_real_sigint_stops_a_ray_run_while_its_units_compute(tmp_path):
    """A real Ctrl-C stops the driver at once (not when the next, here 20 min, unit ends), cancels
    the running units and keeps what finished. A fresh interpreter: only the signal, none of
    the test machinery (the in-process test above raises KeyboardInterrupt itself)."""
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    if cpu_cores() < 2:  # Ray gives each unit a core: the second would wait for the first
        pytest.skip(
            f"two Ray units compute at once only on 2 cores; this process may use {cpu_cores()}"
        )
    (tmp_path / "slow").write_text(str(2 * LOADED))  # units that outlast every wait here
    script = DRIVER.format(
        runner_tests=str(Path(__file__).parent), log=tmp_path, out=str(tmp_path / "run")
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + LOADED  # the event: both units wrote their call line
        while len(calls(tmp_path)) < 2 and driver.poll() is None:
            assert time.monotonic() < deadline, f"Ray started {calls(tmp_path)} in {LOADED} s"
            time.sleep(0.1)
        assert len(calls(tmp_path)) == 2, driver.stdout.read()
        driver.send_signal(signal.SIGINT)
        sent = time.monotonic()
        output, _ = driver.communicate(timeout=LOADED)
        assert driver.returncode == 130, output
        assert time.monotonic() - sent < LOADED, output  # long before either unit ends
        assert "interrupted; finished work is kept." in output
    finally:
        driver.kill()
