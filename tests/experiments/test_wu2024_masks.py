"""wu2024-masks: the claims' computations on hand-made curves, and a small toy run."""

from __future__ import annotations

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


def test_every_mask_finding_is_decided_by_its_least_clear_member_and_names_a_diverged_curve():
    config = EXP.make_config("quick", OVERRIDES)
    passing = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5)))
    assert passing["san-collapses-every-mask"].measured == pytest.approx(-0.5)
    assert "decided by toy/eval/window:1: mean -0.5" in passing["san-collapses-every-mask"].note
    failing = by_id(config, table(curve("complete", -2.0), diverged("window:1")))
    claim = failing["san-collapses-every-mask"]
    assert claim.verdict == "FAIL"
    assert "toy/eval/window:1: 1 of 1 units NaN or diverged" in claim.note


def test_a_missing_mask_fails_every_mask_and_a_maskless_graph_is_excluded_by_name():
    config = EXP.make_config(
        "quick", {**OVERRIDES, "masks": ["complete", "window:1", "dilated:1:2"]}
    )
    claim = by_id(config, table(curve("complete", -2.0)))["san-collapses-every-mask"]
    assert claim.verdict == "FAIL" and "toy/eval/window:1: missing" in claim.note
    assert "excluded by config (1): toy/eval/dilated:1:2 (no center node" in claim.note


def test_every_mask_finding_takes_the_standard_error_over_samples_on_both_sides_of_zero():
    config = EXP.make_config("quick", OVERRIDES)
    # samples at -0.52 and -0.48: interval -0.5 +- 12.7 x 0.02 (Student's t, 2 samples) lies below 0
    clear = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5, spread=0.02)))
    assert clear["san-collapses-every-mask"].verdict == "PASS"
    # samples at -0.0306 and +0.0194: the interval straddles 0; more samples would decide it
    thin = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.0056, spread=0.025)))
    claim = thin["san-collapses-every-mask"]
    assert claim.verdict == "NOT TESTED"
    assert claim.untested.startswith("toy/eval/window:1: preset too small")
    assert (
        claim.n_needed == 156 and "the paper preset" in claim.untested
    )  # t_n sd / sqrt(n) < 0.0056
    # the rule is two-sided: a rise inside the spread is not decided, a clear rise fails
    up = by_id(config, table(curve("complete", -2.0), curve("window:1", 0.01, spread=0.05)))
    assert up["san-collapses-every-mask"].verdict == "NOT TESTED"
    up = by_id(config, table(curve("complete", -2.0), curve("window:1", 0.01)))
    assert up["san-collapses-every-mask"].verdict == "FAIL"


def test_members_outside_thm1s_assumptions_are_not_tested_by_rule_with_the_assumption_named():
    beyond = EXP.make_config("quick", {**OVERRIDES, "models": ["smollm2"], "modes": ["eval"]})
    # SmolLM2's value maps: ||X||_F grows by e^3 per layer while its mu_rel barely moves
    amplifying = table(curve("complete", -2.0, growth=3.0), curve("window:1", 0.003, growth=3.0))
    found = by_id(beyond, amplifying.assign(model="smollm2", init="pretrained"))
    for id_ in ("san-collapses-every-mask@smollm2", "local-masks-slower@smollm2/eval",
                "rate-follows-radius@smollm2/eval"):  # fmt: skip
        assert found[id_].verdict == "NOT TESTED", found[id_]
        assert found[id_].untested.startswith("assumptions not met")
        assert "A3: bounded value maps" in found[id_].untested + found[id_].note
    # train mode: dropout on the attention probabilities; eval mode decides alone
    real = EXP.make_config("quick", {"models": ["minilm"], "masks": ["complete", "window:1"],
                                     "n_tokens": 8})  # fmt: skip
    rows = table(*(c.assign(model="minilm", init="pretrained") for c in (
        curve("complete", -2.0), curve("window:1", -0.5),
        curve("complete", 0.5, mode="train"), curve("window:1", 0.6, mode="train"))))  # fmt: skip
    claim = by_id(real, rows)["san-collapses-every-mask"]
    assert claim.verdict == "PASS" and "minilm/train/complete: assumptions not met" in claim.note
    assert "row-stochastic attention" in claim.note


def test_a_model_beyond_the_papers_bert_has_findings_of_its_own_that_never_decide_the_papers():
    config = EXP.make_config("quick", {**OVERRIDES, "models": ["toy", "smollm2"],
                                       "modes": ["eval"]})  # fmt: skip
    toy = table(curve("complete", -2.0), curve("window:1", -0.5))
    found = by_id(config, table(toy, RISING))  # SmolLM2's window:1 rises, as at the paper preset
    paper, beyond = found["san-collapses-every-mask"], found["san-collapses-every-mask@smollm2"]
    assert paper.verdict == "PASS" and paper.kind == "finding" and "smollm2" not in paper.note
    assert beyond.verdict == "FAIL" and beyond.kind == "beyond"
    assert "smollm2/eval/window:1: mean 0.003" in beyond.note
    assert found["local-masks-slower@smollm2/eval"].kind == "beyond"
    assert found["local-masks-slower@toy/eval"].kind == "finding"


def test_rate_follows_radius_does_not_pass_when_no_mask_collapses():
    config = EXP.make_config("quick", {**OVERRIDES, "models": ["smollm2"], "modes": ["eval"]})
    rising = table(curve("complete", 0.001), curve("window:1", 0.003))  # ordered, not collapsing
    claim = by_id(config, rising.assign(model="smollm2"))["rate-follows-radius@smollm2/eval"]
    assert claim.verdict == "FAIL" and claim.measured == 0.0


def test_layernorm_at_init_is_the_papers_two_sentences_per_mode():
    config = EXP.make_config("quick", LN)
    measured = by_id(config, bert(-0.01, ln_complete=-13.1))  # eval: LN's complete mask falls
    stable_eval, stable_train = measured["ln-mu-stable@eval"], measured["ln-mu-stable@train"]
    # mu's trend after the first block: 3 x the slope (layers 1 to 4)
    assert stable_eval.verdict == "FAIL" and "bert-base/complete: mean -39.3" in stable_eval.note
    assert "eval mode (the paper does not say whether dropout was on" in stable_eval.note
    assert stable_train.verdict == "PASS" and stable_train.measured == pytest.approx(-0.03)
    assert measured["san-mu-falls@eval"].verdict == "PASS"
    assert measured["san-mu-falls@eval"].source.startswith("Fig. 2")
    assert stable_eval.source.startswith("Fig. 2")
    only_eval = EXP.make_config("quick", {**LN, "modes": ["eval"]})
    assert "ln-mu-stable@train" not in by_id(only_eval, bert(-0.01))
    # no random-init real model (the toy, a pretrained model): no statement about BERT at init
    assert not any(k.startswith(("ln-", "san-mu")) for k in by_id(
        EXP.make_config("quick", OVERRIDES), table(curve("complete", -2.0))))  # fmt: skip


def test_local_masks_slower_is_the_per_sample_gap_between_the_masks_slopes():
    config = EXP.make_config("quick", OVERRIDES)
    gap = by_id(config, table(curve("complete", -2.0), curve("window:1", -0.5)))
    assert gap["local-masks-slower@toy/eval"].measured == pytest.approx(1.5)
    faster = by_id(config, table(curve("complete", -0.5), curve("window:1", -2.0)))
    assert faster["local-masks-slower@toy/eval"].verdict == "FAIL"


def test_pure_san_collapses_under_every_mask_slower_the_more_local_on_a_small_toy(toy_run):
    _, _, summary = toy_run
    found = {c.id: c for c in summary.claims}
    # at 12 tokens and 20 layers the window (radius 6) barely moves: its geometric mean falls
    # by 0.013 per layer while two of three samples rise, so the sign is not decided
    every = found["san-collapses-every-mask"]
    assert every.verdict == "NOT TESTED", every
    assert every.untested.startswith("toy/eval/window:1: preset too small")
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
