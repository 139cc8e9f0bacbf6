"""A throwaway experiment for the runner tests (not registered): cheap, deterministic units,
and a call log plus a failure switch in `config.log_dir`, so tests can count recomputation
and simulate a unit that dies midway.

Units: one per (item, seed). Claims: one that passes, one that fails.
Switches in `log_dir`: `fail-ITEM` makes that item's units raise; `wait-ITEM-SEED` holding
"FOLDER N" makes that unit wait until N unit files are stored in FOLDER; `slow` holding S
makes every unit take S seconds longer; `slow-summary` holding S makes `summarize` write
`summarizing` and then take S seconds longer (so a test can kill a run while it reports).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments import Experiment, Quote, Summary, finding
from rankcollapse.plot import band_plot
from rankcollapse.seeds import Seed


class Net(BaseModel):
    model_config = ConfigDict(extra="forbid")
    depth: int = Field(3, ge=1, le=8)
    norm: str = "none"


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: int = Field(3, ge=1, le=20)
    seeds: list[Seed] = [0, 1]
    net: Net = Net()
    log_dir: str = ""


PRESETS = {"quick": {}, "paper": {"items": 10, "seeds": [0, 1, 2]}}


def units(config: Config) -> list[dict]:
    return [{"item": i, "seed": s} for i in range(config.items) for s in config.seeds]


def run_unit(config: Config, unit: dict) -> pd.DataFrame:
    log = Path(config.log_dir)
    with open(log / "calls.log", "a") as f:
        f.write(f"{unit['item']}-{unit['seed']}\n")
    if (log / f"fail-{unit['item']}").exists():
        raise RuntimeError(f"simulated crash in item {unit['item']}.")  # a full stop of its own
    if (log / f"die-{unit['item']}").exists():  # the worker process itself dies (as on OOM)
        os.kill(os.getpid(), signal.SIGKILL)
    wait = log / f"wait-{unit['item']}-{unit['seed']}"
    if wait.exists():  # "FOLDER N": hold this unit until N unit files are stored in FOLDER
        folder, n = wait.read_text().split()
        deadline = time.monotonic() + 600  # minutes: a loaded 2-core machine
        while len(list(Path(folder).glob("*.json"))) < int(n):
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {n} units were stored in {folder} within 600 s")
            time.sleep(0.05)
    if (log / "slow").exists():  # in short steps, as real units run many short kernels: a
        end = time.monotonic() + float((log / "slow").read_text())  # cancel lands between them
        while time.monotonic() < end:
            time.sleep(min(0.05, max(end - time.monotonic(), 0)))
    g = torch.Generator().manual_seed(1000 * unit["seed"] + unit["item"])
    x = torch.randn(16, 16, generator=g, dtype=torch.float64)
    rows = []
    for layer in range(config.net.depth + 1):
        value = float((x - x.mean(0)).norm() / x.norm())
        rows.append({**unit, "layer": layer, "metric": "res", "value": value, "at_floor": False})
        x = torch.softmax(x @ x.T / 4, dim=-1) @ x
    return pd.DataFrame(rows)


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    log = Path(config.log_dir)
    if (log / "slow-summary").exists():
        (log / "summarizing").touch()
        time.sleep(float((log / "slow-summary").read_text()))
    means = results.groupby("layer", as_index=False)["value"].mean()
    values = results["value"]  # the residual at every layer of every unit
    says = Quote("the residual stays positive", "a test")
    return Summary(
        tables={"mean per layer": means},
        figures={"res vs layer": band_plot(results, hue="metric", title="tiny")},
        claims=[
            finding(
                "positive",
                says=says,
                text="the residual stays positive",
                quantity="last mean",
                values=values,
                side=">",
                margin=0.0,
            ),
            finding(
                "impossible",
                says=says,
                text="the residual exceeds 1e9",
                quantity="last mean",
                values=values,
                side=">",
                margin=1e9,
            ),
        ],
        notes=[f"pid-free note: {os.sep == '/'}"],
    )


TINY = Experiment(
    name="tiny",
    description="A throwaway experiment for runner tests.",
    config=Config,
    presets=PRESETS,
    units=units,
    run_unit=run_unit,
    summarize=summarize,
)


def sleeping_unit(config: object, unit: dict) -> pd.DataFrame:
    """A unit that takes unit["seconds"] (for tests of the order in which workers take work)."""
    time.sleep(unit["seconds"])
    return pd.DataFrame({"metric": ["slept"], "value": [unit["seconds"]]})
