"""wu2024-temperature on a small toy: the early-drop measure and the d_QK claims."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_temperature import early_drop, summarize

EXP = get_experiment("wu2024-temperature")
SMALL_TOY = {
    "models": ["toy"],
    "masks": ["complete", "causal"],
    "toy_layers": 6,
    "toy_d_model": 32,
    "toy_tokens": 12,
    "toy_samples": 3,
}


@pytest.fixture(scope="module")
def summary(run_quick):
    return summarize(*run_quick(EXP.name, SMALL_TOY))


def test_early_drop_is_the_mean_log_decrease_clipped_at_the_floor():
    curve = pd.DataFrame({"layer": [0, 0, 1, 1], "value": [1.0, 1.0, 0.1, 1e-3]})
    assert early_drop(curve, 1, 1e-15) == pytest.approx(-np.mean(np.log([0.1, 1e-3])))
    floored = pd.DataFrame({"layer": [0, 1], "value": [1.0, 0.0]})
    assert early_drop(floored, 1, 1e-15) == pytest.approx(15 * np.log(10))


def test_smaller_dqk_slows_early_collapse_most_for_complete_on_a_small_toy(summary):
    claims = {c.id: c for c in summary.claims}
    assert claims["smaller-dqk-slows@toy/eval"].passed, claims["smaller-dqk-slows@toy/eval"]
    assert claims["complete-most@toy/eval"].passed, claims["complete-most@toy/eval"]


def test_early_layers_beyond_the_toy_depth_is_a_config_error():
    with pytest.raises(ConfigError, match="early_layers=20 exceeds toy_layers=16"):
        EXP.make_config("quick", {"early_layers": 20})
