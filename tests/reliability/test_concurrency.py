"""Two `rankcollapse run` processes at once: on the same config the second waits for the first
and reuses its units; on different configs under one results root neither blocks the other."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tiny_experiment import TINY

from rankcollapse.runner import plan


def wait_for(condition, what: str, timeout: float = 600) -> None:
    """Wait for an event; the deadline is minutes, as a loaded 2-core machine needs."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


def calls(log_dir: Path) -> list[str]:
    path = log_dir / "calls.log"
    return path.read_text().split() if path.exists() else []


def test_a_second_run_of_the_same_config_waits_and_reuses_every_unit(tmp_path, cli_process):
    gate = tmp_path / "gate"
    gate.mkdir()
    (tmp_path / "wait-0-0").write_text(f"{gate} 1")  # the first unit waits for the test
    argv = ["run", "tiny", "--set", f"log_dir={tmp_path}", "--out", str(tmp_path / "run")]
    first = cli_process(argv, tmp_path / "first.log")
    wait_for(lambda: calls(tmp_path) == ["0-0"], "the first run starting its first unit")
    second = cli_process(argv, tmp_path / "second.log")
    wait_for(lambda: "waiting for it to finish" in second.output(), "the second run waiting")
    (gate / "go.json").touch()
    assert (first.join(), second.join()) == (0, 0), first.output() + second.output()
    assert sorted(calls(tmp_path)) == ["0-0", "0-1", "1-0", "1-1", "2-0", "2-1"]  # once each
    assert "6 units run, 0 reused" in first.output()
    assert "in use by another run of the same config" in second.output()
    assert "0 units run, 6 reused" in second.output()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["waited_for_lock_seconds"] > 0 and manifest["n_computed"] == 0


def test_runs_of_different_configs_under_one_results_root_do_not_block(tmp_path, cli_process):
    logs = {name: tmp_path / name for name in ("a", "b")}
    for log in logs.values():
        log.mkdir()
    results = tmp_path / "results"
    b_units = plan(TINY, overrides={"log_dir": str(logs["b"])}, results_root=results).out_dir
    # a's first unit waits until b has stored all its units: it finishes only if b never waits
    (logs["a"] / "wait-0-0").write_text(f"{b_units / 'units'} 6")
    runs = {
        name: cli_process(
            ["run", "tiny", "--set", f"log_dir={log}"], tmp_path / f"{name}.out", tmp_path
        )
        for name, log in logs.items()
    }
    wait_for(lambda: calls(logs["a"]) == ["0-0"], "a starting its first unit")
    assert runs["b"].join() == 0, runs["b"].output()
    assert runs["a"].join() == 0, runs["a"].output()
    assert len(calls(logs["a"])) == len(calls(logs["b"])) == 6
    assert len(list((results / "tiny").iterdir())) == 2
    assert "waiting" not in runs["a"].output() + runs["b"].output()
