"""dong2021-bounds: a tiny run, and the arithmetic of the three findings on hand-made tables."""

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_bounds import claims, summarize
from rankcollapse.theory import bound_margins, log_ratios

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from dong2021_bounds import OVERRIDES, table

EXP = get_experiment("dong2021-bounds")
TINY = {"n_layers": 3, "n_samples": 2, "levels": [0.9, 0.99], "seeds": [0, 1]}


@pytest.fixture(scope="module")
def tiny(run_quick):
    return run_quick(EXP.name, TINY)


def test_rows_carry_level_and_inputs_sit_at_their_level(tiny):
    _, results = tiny
    assert list(results.columns) == [
        "variant", "seed", "level", "layer", "sample", "metric", "value", "at_floor",
    ]  # fmt: skip
    assert set(results["variant"]) == {"san-1head", "san", "san+mlp", "san+skip"}
    r0 = results[(results["metric"] == "r") & (results["layer"] == 0)]
    c = results[results["metric"] == "c"]
    merged = r0.merge(c, on=["variant", "seed", "sample"], suffixes=("", "_c"))
    level = merged["value"] * merged["value_c"] ** 0.5
    assert level.to_numpy() == pytest.approx(merged["level"].to_numpy(), rel=1e-9)


def test_findings_hold_on_a_tiny_run_and_test_the_bound_at_layer_two(tiny):
    config, results = tiny
    by_id = {c.id: c for c in summarize(config, results).claims}
    # two seeds: the cubic ratio's 95 % interval (12.7 standard errors) decides nothing yet;
    # nothing fails, and the skip row (8 sequences) passes
    assert all(c.verdict != "FAIL" for c in by_id.values()), [
        (c.id, c.note) for c in by_id.values()
    ]
    assert by_id["skip-keeps-residual"].verdict == "PASS" and by_id["bound-holds"].passed
    assert by_id["cubic-contraction"].untested.startswith("preset too small")
    assert "2: " in by_id["bound-holds"].note  # values checked at layer 2, not only layer 1
    assert by_id["bound-holds"].kind == "check"  # gamma = 1 is not the paper's verified gamma
    assert all(c.source and c.paper for c in by_id.values() if c.kind != "check")
    skip = by_id["skip-keeps-residual"]
    assert skip.kind == "finding" and "pure SAN of the same weights" in skip.note


def test_log_ratios_of_a_cubic_sequence_are_three():
    ratios = log_ratios(table(seeds=(0,)))
    san = ratios[ratios["variant"] == "san"]["ratio"]
    assert san.tolist() == pytest.approx(
        [math.log(1.25e-4) / math.log(0.05), math.log(2e-12) / math.log(1.25e-4)]
    )


def test_bound_margins_are_bound_minus_measured_in_decades():
    margins = bound_margins(table(seeds=(0,))[lambda d: d["variant"] == "san"])
    assert margins["one_step"].tolist() == [1.0, 2.0]
    assert margins["unrolled"].tolist() == [1.0, 3.0]


def test_bound_holds_fails_when_layer_two_is_never_above_the_floor():
    config = EXP.make_config("quick", OVERRIDES)
    floored = table(san={"floor": (False, False, True)})
    claim = {c.id: c for c in claims(config, floored)}["bound-holds"]
    assert (
        not claim.passed
        and math.isnan(claim.measured)
        and "checked per layer: 1: 2" in (claim.note)
    )


def test_bound_holds_is_a_check_that_fails_when_the_bound_is_below_a_layer():
    config = EXP.make_config("quick", OVERRIDES)
    claim = {c.id: c for c in claims(config, table())}["bound-holds"]
    assert claim.kind == "check" and claim.verdict == "PASS"
    below = table(san={"one_step": [math.nan, -3, -13]})  # layer 2: 1 decade under r_2
    claim = {c.id: c for c in claims(config, below)}["bound-holds"]
    assert claim.kind == "check" and claim.verdict == "FAIL" and claim.measured == -1.0


def test_skip_levels_must_differ_from_the_informative_levels():
    with pytest.raises(ConfigError, match="skip_levels share"):
        EXP.make_config("quick", {"levels": [0.5, 10.0], "skip_levels": [10.0]})


def test_bound_holds_ignores_uninformative_sequences():
    config = EXP.make_config("quick", OVERRIDES)
    results = table(san={"one_step": [math.nan, -5, -13]}, seeds=(0,))
    results.loc[results["metric"] == "informative", "value"] = 0.0
    results = pd.concat(
        [results, table(seeds=(0,))], ignore_index=True
    )  # the same sequence, informative
    results.loc[: len(results) // 2 - 1, "sample"] = 1
    claim = {c.id: c for c in claims(config, results)}["bound-holds"]
    assert claim.passed and claim.measured == 1.0


def test_skip_keeps_residual_assumes_the_pure_san_collapses_on_its_inputs():
    config = EXP.make_config("quick", OVERRIDES)
    claim = {c.id: c for c in claims(config, table(pure=(1.5, 1.2, 1.0)))}["skip-keeps-residual"]
    assert claim.verdict == "NOT TESTED"  # the pure SAN loses 0.5 decades: nothing to stop
    assert claim.untested.startswith("assumptions not met: the pure SAN of the same weights")


def test_old_keys_fail_with_the_new_names():
    with pytest.raises(ConfigError, match="depth.*n_layers"):
        EXP.make_config("quick", {"depth": 4})
    with pytest.raises(ConfigError, match="variants"):
        EXP.make_config("quick", {"variants": ["cor3.1"]})
