"""wu2024-temperature: the early-drop claims on hand-made curves and on a small toy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_temperature import claims, label, summarize
from rankcollapse.theory import early_drop

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_temperature import OVERRIDES, table

EXP = get_experiment("wu2024-temperature")
SMALL_TOY = {
    "models": ["toy"],
    "masks": ["complete", "causal"],
    "toy": {"n_layers": 6, "d_model": 32, "n_tokens": 16, "n_samples": 8},
}


@pytest.fixture(scope="module")
def summary(run_quick):
    return summarize(*run_quick(EXP.name, SMALL_TOY))


def test_early_drop_is_the_mean_log_decrease_clipped_at_the_floor():
    curve = pd.DataFrame({"layer": [0, 0, 1, 1], "value": [1.0, 1.0, 0.1, 1e-3]})
    assert early_drop(curve, 1, 1e-15) == pytest.approx(-np.mean(np.log([0.1, 1e-3])))
    floored = pd.DataFrame({"layer": [0, 1], "value": [1.0, 0.0]})
    assert early_drop(floored, 1, 1e-15) == pytest.approx(15 * np.log(10))


def test_the_gap_is_the_smallest_relative_drop_difference_over_masks():
    config = EXP.make_config("quick", OVERRIDES)
    found = {c.id: c for c in claims(config, table(complete=(-0.1, -3.0), causal=(-0.1, -0.5)))}
    # causal: early drops 1.6 (d_QK 64: 3 x 0.5 + 0.1) and 0.4 (1/64): (1.6 - 0.4) / 1.6
    assert found["smaller-dqk-slows@toy/eval"].measured == pytest.approx(0.75)
    assert found["smaller-dqk-slows@toy/eval"].n_units == 2  # the samples
    assert found["complete-most@toy/eval"].passed
    assert found["shallow-layers-more@toy/eval"].passed


def test_a_missing_mask_fails_smaller_dqk_slows():
    config = EXP.make_config("quick", OVERRIDES)
    rows = table(complete=(-0.1, -3.0), causal=(-0.1, -0.5))
    found = {c.id: c for c in claims(config, rows[rows["mask"] == "complete"])}
    assert found["smaller-dqk-slows@toy/eval"].verdict == "FAIL"
    assert "causal: missing" in found["smaller-dqk-slows@toy/eval"].note


def test_smaller_dqk_slows_early_collapse_most_for_complete_on_a_small_toy(summary):
    found = {c.id: c for c in summary.claims}
    assert found["smaller-dqk-slows@toy/eval"].passed, found["smaller-dqk-slows@toy/eval"]
    assert found["complete-most@toy/eval"].passed, found["complete-most@toy/eval"]


def test_dqk_labels_are_fractions():
    assert [label(v) for v in (1 / 64, 1.0, 64.0)] == ["d_QK = 1/64", "d_QK = 1", "d_QK = 64"]


def test_early_layers_beyond_the_toy_depth_is_a_config_error():
    with pytest.raises(ConfigError, match="early_layers=20 exceeds toy.n_layers=16"):
        EXP.make_config("quick", {"early_layers": 20})


def test_a_causal_decoder_is_beyond_the_papers_encoder_setting():
    # the same hand-made curves named as the encoder MiniLM and the decoder SmolLM2
    curves = table(complete=(-0.1, -3.0), causal=(-0.1, -0.5))
    both = pd.concat([curves.assign(model="minilm"), curves.assign(model="smollm2")])
    config = EXP.make_config("quick", {**OVERRIDES, "models": ["minilm", "smollm2"]})
    kinds = {c.id: c.kind for c in claims(config, both.assign(init="pretrained"))}
    assert kinds["smaller-dqk-slows@minilm/eval"] == "finding"
    assert kinds["complete-most@minilm/eval"] == "finding"
    assert kinds["smaller-dqk-slows@smollm2/eval"] == "beyond"
    assert kinds["complete-most@smollm2/eval"] == "beyond"
    assert kinds["shallow-layers-more@smollm2/eval"] == "beyond"


def test_a_mask_without_early_collapse_has_nothing_to_slow():
    config = EXP.make_config("quick", OVERRIDES)
    # causal: mu_rel grows over the first layers at both d_QK (SmolLM2 under the window masks)
    rows = table(complete=(-0.1, -3.0), causal=(0.01, 0.006), late=0.006)
    slows = {c.id: c for c in claims(config, rows)}["smaller-dqk-slows@toy/eval"]
    assert slows.verdict == "PASS" and slows.measured == pytest.approx((8.994 - 0.4) / 8.994)
    assert "causal: assumptions not met: early collapse at d_QK = 64 (mu_rel grows" in slows.note
    none = table(complete=(0.01, 0.006), causal=(0.01, 0.006), late=0.006)
    claim = {c.id: c for c in claims(config, none)}["smaller-dqk-slows@toy/eval"]
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("assumptions not met")
