"""Shared fixtures of the experiment tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
import torch
from pydantic import BaseModel

from rankcollapse.experiments import get_experiment

RunQuick = Callable[[str, dict[str, Any]], tuple[BaseModel, pd.DataFrame]]


@pytest.fixture(scope="session")
def run_quick() -> RunQuick:
    """`run_quick(name, overrides) -> (config, results)`: every unit of the quick preset with
    `overrides`, in unit order, on one torch thread as the runner uses (tiny tensors are
    slower with more threads)."""

    def run(name: str, overrides: dict[str, Any]) -> tuple[BaseModel, pd.DataFrame]:
        exp = get_experiment(name)
        config = exp.make_config("quick", overrides)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            frames = [exp.run_unit(config, unit) for unit in exp.units(config)]
        finally:
            torch.set_num_threads(threads)
        return config, pd.concat(frames, ignore_index=True)

    return run
