"""wu2024-masks: the claims' computations on hand-made curves, and a small toy run."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.wu2024_masks import claims, summarize, units

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from wu2024_masks import LN, OVERRIDES, RISING, bert, curve, diverged, table

EXP = get_experiment("wu2024-masks")
SMALL_TOY = {
    "models": ["toy"],
    "masks": ["complete", "causal", "window:1", "causal_window:1"],
    "variants": ["san"],
    "toy": {"n_layers": 20, "d_model": 16, "n_tokens": 12, "n_samples": 3},
}


@pytest.fixture(scope="module")
def toy_run(run_quick):
    config, results = run_quick(EXP.name, SMALL_TOY)
    return config, results, summarize(config, results)


def by_id(config, results) -> dict:
    return {c.id: c for c in claims(config, results)}


def test_units_are_model_by_mask():
    config = EXP.make_config("quick", {"models": ["toy", "minilm"], "masks": ["causal"]})
    assert units(config) == [
        {"model": "toy", "mask": "causal"},
        {"model": "minilm", "mask": "causal"},
    ]


def test_every_mask_finding_measures_the_largest_slope_and_names_a_diverged_curve():
    config = EXP.make_config("quick", OVERRIDES)
    passing = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5)))
    assert passing["san-collapses-every-mask"].measured == pytest.approx(-0.5)
    failing = by_id(config, table(curve("complete", -2.0), diverged("window:1")))
    claim = failing["san-collapses-every-mask"]
    assert not claim.passed and "toy/eval/window:1: NaN or diverged" in claim.note


def test_a_missing_mask_leaves_every_mask_untested_and_a_maskless_graph_is_excluded_by_name():
    config = EXP.make_config(
        "quick", {**OVERRIDES, "masks": ["complete", "window:1", "dilated:1:2"]}
    )
    claim = by_id(config, table(curve("complete", -2.0)))["san-collapses-every-mask"]
    assert claim.verdict == "NOT TESTED" and "toy/eval/window:1: missing" in claim.note
    assert "excluded by config (1): toy/eval/dilated:1:2 (no center node" in claim.note


def test_every_mask_finding_names_its_deciding_member_and_a_margin_inside_the_spread_is_untested():
    config = EXP.make_config("quick", OVERRIDES)
    clear = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5, spread=0.1)))
    claim = clear["san-collapses-every-mask"]
    # samples at -0.6 and -0.4: sd 0.14 < 0.5, decided
    assert claim.verdict == "PASS"
    assert "deciding member toy/eval/window:1: slope -0.5, per-sample sd 0.14" in claim.note
    thin = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.0056, spread=0.025)))
    claim = thin["san-collapses-every-mask"]
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("preset too small")
    assert "toy/eval/window:1's slope -0.0056 is within one standard deviation (0.035)" in (
        claim.untested
    )  # samples at -0.0306 and +0.0194: sd 0.025 sqrt(2)
    # a positive slope is a failure whatever the spread
    up = by_id(config, table(curve("complete", -2.0), curve("window:1", 0.01, spread=0.05)))
    assert up["san-collapses-every-mask"].verdict == "FAIL"


def test_a_model_beyond_the_papers_bert_has_findings_of_its_own_that_never_decide_the_papers():
    config = EXP.make_config("quick", {**OVERRIDES, "models": ["toy", "smollm2"]})
    toy = table(curve("complete", -2.0), curve("window:1", -0.5))
    found = by_id(config, table(toy, RISING))  # SmolLM2's window:1 rises, as at the paper preset
    paper, beyond = found["san-collapses-every-mask"], found["san-collapses-every-mask@smollm2"]
    assert paper.verdict == "PASS" and paper.kind == "finding" and "smollm2" not in paper.note
    assert beyond.verdict == "FAIL" and beyond.kind == "beyond"
    assert "smollm2/eval/window:1: 0.003" in beyond.note
    assert found["local-masks-slower@smollm2/eval"].kind == "beyond"
    assert found["local-masks-slower@toy/eval"].kind == "finding"


def test_layernorm_at_init_is_a_finding_per_mode_with_its_deciding_member():
    config = EXP.make_config("quick", LN)
    measured = by_id(config, bert(-0.5, ln_complete=-13.1))  # eval: LN falls faster
    eval_, train = measured["ln-slows-collapse@eval"], measured["ln-slows-collapse@train"]
    # the log gap at layer 4, the deepest layer (no curve reaches the floor)
    assert eval_.verdict == "FAIL" and eval_.measured == pytest.approx(4 * (-13.1 + 6.2))
    assert "deciding member bert-base/complete: gap -27.6, per-sample sd 0" in eval_.note
    assert f"bert-base/complete at layer 4: san+ln {math.exp(-52.4):.3g}" in eval_.note
    assert train.verdict == "PASS" and train.measured == pytest.approx(4 * (-0.5 + 1.0))
    # a gap inside the spread of its samples is not decided
    thin = table(curve("complete", -6.2, mode="eval"),
                 curve("complete", -6.19, mode="eval", variant="san+ln", spread=0.05))  # fmt: skip
    one = EXP.make_config("quick", {**LN, "masks": ["complete"], "modes": ["eval"]})
    claim = by_id(one, thin.assign(model="bert-base"))["ln-slows-collapse@eval"]
    assert claim.verdict == "NOT TESTED" and "within one standard deviation" in claim.untested
    only_eval = EXP.make_config("quick", {**LN, "modes": ["eval"]})
    assert "ln-slows-collapse@train" not in by_id(only_eval, bert(-0.5))
    # no random-init real model (the toy, a pretrained model): no statement about BERT at init
    assert not any(k.startswith("ln-slows") for k in by_id(EXP.make_config("quick", OVERRIDES),
                                                            table(curve("complete", -2.0))))  # fmt: skip


def test_local_masks_slower_is_a_speed_ratio_only_between_two_collapse_rates():
    config = EXP.make_config("quick", OVERRIDES)
    ratio = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5)))
    assert ratio["local-masks-slower@toy/eval"].measured == pytest.approx(4.0)
    growing = by_id(config, table(curve("complete", -2.0), curve("window:1", 0.1)))
    claim = growing["local-masks-slower@toy/eval"]
    assert math.isnan(claim.measured) and "not both collapse rates" in claim.note


def test_pure_san_collapses_under_every_mask_slower_the_more_local_on_a_small_toy(toy_run):
    _, _, summary = toy_run
    found = {c.id: c for c in summary.claims}
    # at 12 tokens and 20 layers the window (radius 6) barely moves: its geometric mean falls
    # by 0.013 per layer while two of three samples rise, so the sign is not decided
    every = found["san-collapses-every-mask"]
    assert every.verdict == "NOT TESTED", every
    assert "deciding member toy/eval/window:1" in every.note
    assert found["local-masks-slower@toy/eval"].passed, found["local-masks-slower@toy/eval"]
    slopes = summary.tables["pure SAN: collapse slope of mu per layer"].iloc[0]
    assert slopes["complete"] < slopes["causal"] < slopes["window:1"] < 0


def test_rows_are_tidy_and_float64(toy_run):
    config, results, _ = toy_run
    assert list(results.columns[:6]) == ["model", "init", "variant", "mask", "mode", "layer"]
    assert results["value"].dtype == np.float64 and set(results["device"]) == {"cpu"}
    per_curve = config.toy.n_samples * (config.toy.n_layers + 1) * 2  # samples x layers x metrics
    assert len(results) == per_curve * len(config.variants) * len(config.masks)


def test_unknown_mask_family_fails_before_any_unit():
    with pytest.raises(ConfigError, match="masks"):
        EXP.make_config("quick", {"masks": ["windw:1"]})


def test_a_diverged_curve_is_reported_in_the_notes(toy_run):
    config, results, _ = toy_run
    extra = diverged("causal").assign(variant="san+skip", mode="train")
    summary = summarize(config, pd.concat([results, extra], ignore_index=True))
    assert any("san+skip (train, mask causal)" in note and "overflowed" in note
               for note in summary.notes)  # fmt: skip
