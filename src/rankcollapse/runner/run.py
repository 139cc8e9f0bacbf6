"""Run an experiment: resolve and validate its config, run (or reuse) every unit, store the
results and build the report.

    config = preset <- --config FILE.yaml <- --set key=value   (each merged over the last)
    DIR    = results/NAME/<first 10 hex of sha256(name, resolved config)>/
    DIR/units/<unit hash>.json  one per finished unit: typed columns, checksummed (see _store.py)
    DIR/config.yaml, manifest.json, results.csv, then claims.json, figures/, report.html

Every config is validated, and every unit list built, before any unit runs. Units are
independent; with `jobs > 1` they run in spawned worker processes; every unit runs with one
torch thread (in a worker or not) and rows are assembled in unit order, so the results do not
depend on `jobs`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import multiprocessing
import os
import pickle
import platform
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from pydantic import BaseModel

from rankcollapse import __version__
from rankcollapse.errors import ConfigError, InputError, UnitError
from rankcollapse.experiments import (
    Claim,
    Experiment,
    Summary,
    Unit,
    experiment_names,
    get_experiment,
    merge_values,
    nest_dotted,
)
from rankcollapse.files import TMP_SUFFIX, canonical_json, digest, write_atomic
from rankcollapse.runner._store import OLD_SUFFIX, SUFFIX, load_unit, save_unit

Progress = Callable[[str, int, int], None]  # (experiment name, units done, units in all)

PACKAGES = ("torch", "numpy", "pandas", "pydantic", "matplotlib", "scipy", "transformers")


@dataclass
class Plan:
    """A validated run that has not started: what `execute` needs, all checked."""

    experiment: Experiment
    preset: str
    overrides: dict[str, Any]
    config: BaseModel
    units: list[Unit]
    config_hash: str
    out_dir: Path


@dataclass
class RunResult:
    """A finished run: the tidy results, the claims and where everything was written."""

    name: str
    out_dir: Path
    config: BaseModel
    config_hash: str
    results: pd.DataFrame
    summary: Summary
    report_path: Path
    n_units: int
    n_cached: int  # reused from an earlier (killed or finished) run with the same config
    n_computed: int
    n_corrupt: int = 0  # unit files found damaged (or of an older format) and recomputed
    recomputed: list[dict[str, str]] = field(default_factory=list)  # {"unit_file", "reason"}
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def claims(self) -> list[Claim]:
        return self.summary.claims

    @property
    def all_passed(self) -> bool:
        return all(claim.passed for claim in self.claims)


def parse_overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` strings (values read as YAML scalars or lists) to a dotted-key dict.

    Example:
        >>> parse_overrides(["depth=4", "variants=[san, skip]", "net.norm=post", "scale=1e-3"])
        {'depth': 4, 'variants': ['san', 'skip'], 'net.norm': 'post', 'scale': 0.001}
    """
    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--set expects key=value, got {pair!r}; e.g. --set depth=4 or --set seeds=[0,1]."
            )
        overrides[key.strip()] = _yaml_value(text)
    return overrides


def _yaml_value(text: str) -> Any:
    value = yaml.safe_load(text)
    # YAML 1.1 reads "1e-3" as a string; a number is what anyone typing it means.
    if isinstance(value, str) and re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value):
        return float(value)
    return value


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML config file (merged over the preset by `plan`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"config file {str(path)!r} does not exist; pass a YAML file of keys.")
    try:
        values = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {err}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(
            f"config file {str(path)!r} holds a {type(values).__name__}; it must be a mapping "
            "of config keys, e.g. 'depth: 4'."
        )
    return values


def config_hash(name: str, config: BaseModel) -> str:
    """sha256 of the experiment name and the resolved config (canonical JSON)."""
    return digest({"experiment": name, "config": config.model_dump(mode="json")})


def plan(
    name: str | Experiment,
    preset: str = "quick",
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    out: str | Path | None = None,
    results_root: str | Path = "results",
) -> Plan:
    """Resolve and validate the config and build the unit list; nothing runs, nothing is written."""
    exp = name if isinstance(name, Experiment) else get_experiment(name)
    values = load_config_file(config_file) if config_file is not None else {}
    values = merge_values(nest_dotted(values), nest_dotted(dict(overrides or {})))
    config = exp.make_config(preset, values)
    units = exp.units(config)
    if not units:
        raise ConfigError(f"{exp.name} has no units of work for this config; check its lists.")
    hashes = [canonical_json(unit) for unit in units]
    if len(set(hashes)) != len(hashes):
        raise ValueError(f"{exp.name}.units returned the same unit twice; units must differ.")
    full_hash = config_hash(exp.name, config)
    out_dir = Path(out) if out is not None else Path(results_root) / exp.name / full_hash[:10]
    return Plan(exp, preset, values, config, units, full_hash, out_dir)


def run_experiment(
    name: str | Experiment,
    preset: str = "quick",
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    results_root: str | Path = "results",
) -> RunResult:
    """Run one experiment (by name, or an `Experiment` object) and build its report.

    Finished units of an earlier run with the same config are reused; a unit that raises is
    re-raised as `UnitError` after every other finished unit is stored, so rerunning the
    same call resumes where it stopped.
    """
    return execute(plan(name, preset, overrides, config_file, out, results_root), jobs, progress)


def run_all(
    preset: str = "quick",
    overrides: Mapping[str, Any] | None = None,
    config_file: str | Path | None = None,
    *,
    jobs: int = 1,
    progress: Progress | None = None,
    results_root: str | Path = "results",
) -> list[RunResult]:
    """Run every registered experiment into results_root/NAME/<config hash>/.

    Every config is validated (and every unit list built) before the first unit runs.
    """
    plans = [
        plan(name, preset, overrides, config_file, results_root=results_root)
        for name in experiment_names()
    ]
    return [execute(p, jobs, progress) for p in plans]


def execute(plan: Plan, jobs: int = 1, progress: Progress | None = None) -> RunResult:
    """Run the units of a plan that have no valid stored result, then store and report."""
    from rankcollapse.report import build_report

    if jobs < 1:
        raise ConfigError(f"jobs is {jobs}; it must be at least 1 (the number of processes).")
    exp, out_dir = plan.experiment, plan.out_dir
    unit_dir = out_dir / "units"
    paths = [unit_dir / f"{digest([plan.config_hash, unit])[:16]}{SUFFIX}" for unit in plan.units]
    started = _now()
    write_atomic(out_dir / "config.yaml", config_yaml(plan.config).encode())

    for partial in unit_dir.glob(f".*{TMP_SUFFIX}"):  # left by a run killed while writing
        partial.unlink(missing_ok=True)
    rows: list[pd.DataFrame | None] = [None] * len(plan.units)
    seconds = [0.0] * len(plan.units)
    recomputed = []
    for i, (unit, path) in enumerate(zip(plan.units, paths)):
        stored, reason = load_unit(path, unit)
        if stored is not None:
            rows[i], seconds[i], _ = stored
            continue
        old = path.with_suffix(OLD_SUFFIX)
        if old.exists():  # a pickle of version 1: never loaded, it could run code
            reason, path = "older pickle format (never loaded)", old
        if reason:
            recomputed.append({"unit_file": path.name, "reason": reason})
            path.unlink()
    n_corrupt = len(recomputed)
    pending = [i for i, r in enumerate(rows) if r is None]
    n_cached = len(plan.units) - len(pending)
    manifest = _manifest(plan, jobs, started, n_cached, len(pending), recomputed)
    write_atomic(out_dir / "manifest.json", _json(manifest))

    done = n_cached
    if progress:
        progress(exp.name, done, len(plan.units))

    def finished(i: int, unit_rows: pd.DataFrame, unit_seconds: float) -> None:
        nonlocal done
        _check_rows(exp.name, plan.units[i], unit_rows)
        save_unit(paths[i], plan.units[i], unit_rows, unit_seconds)
        rows[i], seconds[i] = unit_rows, unit_seconds
        done += 1
        if progress:
            progress(exp.name, done, len(plan.units))

    if jobs == 1:
        with _one_torch_thread():
            for i in pending:
                try:
                    unit_rows, unit_seconds = _timed_call(exp.run_unit, plan.config, plan.units[i])
                except Exception as err:
                    raise _unit_error(exp.name, plan.units[i], err, done, len(plan.units)) from err
                finished(i, unit_rows, unit_seconds)
    else:
        _run_parallel(plan, pending, jobs, finished, lambda: done)

    results = pd.concat([r for r in rows if r is not None], ignore_index=True)
    write_atomic(out_dir / "results.csv", results.to_csv(index=False).encode())
    manifest.update(finished=_now(), unit_seconds=round(sum(seconds), 3), status="complete")
    write_atomic(out_dir / "manifest.json", _json(manifest))
    report = build_report(out_dir, experiment=exp)
    return RunResult(
        name=exp.name,
        out_dir=out_dir,
        config=plan.config,
        config_hash=plan.config_hash,
        results=report.results,
        summary=report.summary,
        report_path=report.path,
        n_units=len(plan.units),
        n_cached=n_cached,
        n_computed=len(pending),
        n_corrupt=n_corrupt,
        recomputed=recomputed,
        manifest=manifest,
    )


def _run_parallel(
    plan: Plan,
    pending: list[int],
    jobs: int,
    finished: Callable[[int, pd.DataFrame, float], None],
    n_done: Callable[[], int],
) -> None:
    exp = plan.experiment
    try:
        pickle.dumps((exp.run_unit, plan.config))
    except Exception as err:
        raise TypeError(
            f"{exp.name}: run_unit and Config must be module-level (picklable) to run with "
            f"jobs > 1 ({err}); use jobs=1 or move them to module level."
        ) from err
    # spawn: a fresh interpreter per worker, safe with torch's own threads (fork is not).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_init_worker) as pool:
        futures = {
            pool.submit(_worker_call, exp.run_unit, plan.config, plan.units[i]): i for i in pending
        }
        remaining = set(futures)
        failure: tuple[int, BaseException] | None = None
        try:
            while remaining:
                done, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=futures.get):
                    if future.cancelled():
                        continue
                    if future.exception() is not None:
                        failure = failure or (futures[future], future.exception())
                        continue
                    finished(futures[future], *future.result())
                if failure:  # let running units finish and be stored; start no new ones
                    for future in remaining:
                        future.cancel()
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    if failure:
        i, err = failure
        raise _unit_error(exp.name, plan.units[i], err, n_done(), len(plan.units)) from err


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Run units with one torch thread, as in a worker, so results do not depend on `jobs`
    (small units are also much faster on a busy machine); restore the setting after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _init_worker() -> None:
    # Units of one run share the machine: one thread each, so `jobs` processes use `jobs` cores.
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"


def _worker_call(run_unit: Callable, config: BaseModel, unit: Unit) -> tuple[pd.DataFrame, float]:
    import torch

    torch.set_num_threads(1)
    return _timed_call(run_unit, config, unit)


def _timed_call(run_unit: Callable, config: BaseModel, unit: Unit) -> tuple[pd.DataFrame, float]:
    start = time.perf_counter()
    rows = run_unit(config, unit)
    return rows, time.perf_counter() - start


def _check_rows(name: str, unit: Unit, rows: Any) -> None:
    if not isinstance(rows, pd.DataFrame) or not {"metric", "value"} <= set(rows.columns):
        got = list(rows.columns) if isinstance(rows, pd.DataFrame) else type(rows).__name__
        raise UnitError(
            f"{name} unit {canonical_json(unit)} returned {got}; run_unit must return a "
            "DataFrame with identifying columns, then 'metric' and 'value'."
        )


def _unit_error(name: str, unit: Unit, err: BaseException, done: int, total: int) -> UnitError:
    return UnitError(
        f"{name} unit {canonical_json(unit)} failed: {type(err).__name__}: {err}. "
        f"{done} of {total} units are stored; rerun the same command to resume."
    )


def config_yaml(config: BaseModel) -> str:
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def _manifest(
    plan: Plan, jobs: int, started: str, n_cached: int, n_pending: int, recomputed: list[dict]
) -> dict[str, Any]:
    packages = {"rankcollapse": __version__, "python": platform.python_version()}
    for package in PACKAGES:
        try:
            packages[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "experiment": plan.experiment.name,
        "description": plan.experiment.description,
        "preset": plan.preset,
        "overrides": plan.overrides,
        "config_hash": plan.config_hash,
        "started": started,
        "finished": None,
        "status": "running",
        "host": platform.node(),
        "platform": platform.platform(),
        "command": " ".join(sys.argv),
        "packages": packages,
        "torch_threads": 1,  # per unit, whatever `jobs` is (see _one_torch_thread)
        "jobs": jobs,
        "seeds": _seeds(plan.config.model_dump(mode="json"), plan.units),
        "n_units": len(plan.units),
        "n_cached": n_cached,
        "n_computed": n_pending,
        "n_corrupt": len(recomputed),
        "recomputed": recomputed,  # unit files that could not be used, and why
    }


def _seeds(config: Any, units: list[Unit]) -> list:
    """Every value of a key named seed/seeds in the config or the units."""
    found: set = set()

    def visit(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                visit(v, k)
        elif isinstance(value, list) and key not in ("seed", "seeds"):
            for v in value:
                visit(v, key)
        elif key in ("seed", "seeds"):
            found.update(value if isinstance(value, list) else [value])

    visit(config)
    visit(units)
    return sorted(found, key=str)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _json(value: Any) -> bytes:
    import json

    return (json.dumps(value, indent=2, default=str) + "\n").encode()
