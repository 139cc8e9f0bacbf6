"""toy-collapse: units, rows and claims on a tiny config, and the claims' arithmetic."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.toy_collapse import claims, run_unit, summarize, units

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from toy_collapse import OVERRIDES, table

EXP = get_experiment("toy-collapse")
TINY = {"n_layers": 5, "d_model": 16, "n_tokens": 8, "n_samples": 3, "seeds": [0, 1]}


@pytest.fixture(scope="module")
def tiny():
    config = EXP.make_config("quick", TINY)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the runner does; tiny tensors are slower with more threads
    try:
        results = pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)
    finally:
        torch.set_num_threads(threads)
    return config, results


def test_one_unit_per_variant_and_seed_and_san_mlp_at_both_gains():
    config = EXP.make_config("quick", {"variants": ["san", "san+mlp"], "seeds": [3, 4]})
    assert units(config) == [
        {"variant": "san", "seed": 3, "mlp_gain": 1.0},
        {"variant": "san", "seed": 4, "mlp_gain": 1.0},
        {"variant": "san+mlp", "seed": 3, "mlp_gain": 1.0},
        {"variant": "san+mlp", "seed": 4, "mlp_gain": 1.0},
        {"variant": "san+mlp", "seed": 3, "mlp_gain": 4.0},
        {"variant": "san+mlp", "seed": 4, "mlp_gain": 4.0},
    ]


def test_the_gain_arm_has_the_same_attention_and_a_larger_residual(tiny):
    config, results = tiny
    mlp = results[(results["variant"] == "san+mlp") & (results["seed"] == 0)]
    first = mlp[mlp["layer"] == 0].groupby("mlp_gain")["value"].mean()
    assert first[1.0] == first[4.0]  # same input, exactly: the gain acts from layer 1 on
    slower = {c.id: c for c in summarize(config, results).claims}["mlp-larger-lambda-slower"]
    # at width 16 the two seeds disagree (Cor 3.2 bounds the rate; it does not order two
    # networks): the one rule leaves it open and says how many seeds would decide it
    assert slower.verdict == "NOT TESTED" and slower.n_units == 2, slower.note
    gaps = re.search(r"seed 0: \+([\d.]+) at layer 3, seed 1: -([\d.]+) at layer 4", slower.note)
    # about three decades each way; seed 1's gain-4 arm has samples at the float64 floor at
    # layer 4, so its gap's last digits follow the CPU's rounding (3.39 on one machine, 3.42
    # on another)
    assert gaps and float(gaps[1]) > 2 and float(gaps[2]) > 2, slower.note


def test_rows_are_tidy_with_every_layer_sample_and_metric(tiny):
    _, results = tiny
    assert list(results.columns) == [
        "variant", "seed", "mlp_gain", "layer", "sample", "metric", "value", "at_floor",
    ]  # fmt: skip
    assert len(results) == (5 + 1) * 2 * (5 + 1) * 3 * 2  # san+mlp twice: gains 1 and 4
    assert set(results["metric"]) == {"res_comp_rel", "mu_rel"}
    assert results["value"].dtype == np.float64


def test_every_variant_sees_the_same_input_for_a_seed(tiny):
    _, results = tiny
    layer0 = results[(results["layer"] == 0) & (results["metric"] == "mu_rel")]
    spread = layer0.groupby(["seed", "sample"])["value"].agg(lambda v: v.max() - v.min())
    assert spread.max() == 0.0


def test_a_unit_is_deterministic_by_seed(tiny):
    config, results = tiny
    again = run_unit(config, {"variant": "san+mlp", "seed": 1, "mlp_gain": 1.0})
    expected = results.query("variant == 'san+mlp' and seed == 1 and mlp_gain == 1.0")
    np.testing.assert_array_equal(again["value"].to_numpy(), expected["value"].to_numpy())


def test_the_findings_on_a_tiny_config(tiny):
    config, results = tiny
    claims = {c.id: c for c in summarize(config, results).claims}
    assert set(claims) == {
        "san-doubly-exponential",
        "skip-keeps-residual",
        "mlp-does-not-prevent",
        "mlp-doubly-exponential",
        "mlp-larger-lambda-slower",
        "ln-does-not-prevent",
    }
    assert not [i for i, c in claims.items() if c.verdict == "FAIL"]
    # two seeds: where they differ, the 95 % interval (12.7 standard errors) decides nothing
    untested = {i: c.untested for i, c in claims.items() if c.verdict == "NOT TESTED"}
    assert "mlp-larger-lambda-slower" in untested, untested  # see the test above
    assert claims["san-doubly-exponential"].verdict == "PASS"
    # LayerNorm delays the collapse at random init but does not prevent it (Dong, Sec. 3.3)
    assert "san+ln above pure SAN per layer" in claims["ln-does-not-prevent"].note


def test_summary_has_the_figure_and_per_layer_tables(tiny):
    config, results = tiny
    summary = summarize(config, results)
    assert list(summary.figures) == ["residual vs layer"]
    wide = summary.tables["mean res_comp_rel per layer"]
    assert list(wide.columns) == ["layer", "san", "san+skip", "san+mlp", "san+ln", "transformer"]
    res = results[results["metric"] == "res_comp_rel"]
    mean = res.query("variant == 'san+skip' and layer == 2 and mlp_gain == 1")["value"].mean()
    assert wide.loc[2, "san+skip"] == f"{mean:.3g}"


def test_report_tables_show_a_floored_layer_as_the_printed_tables_do(tiny):
    config, results = tiny
    res = results["metric"] == "res_comp_rel"
    at = res & (results["variant"] == "san") & (results["layer"] == 5)
    at_floor = at & (results["sample"] > 0)  # 2 of 3 samples per seed: 4 of 6
    floored = results.assign(at_floor=results["at_floor"].astype(bool) & ~at | at_floor)
    floored.loc[at & ~at_floor, "value"] = 0.25
    floored.loc[res & (results["variant"] == "san") & (results["layer"] == 4), "at_floor"] = True
    tables = summarize(config, floored).tables
    wide = tables["mean res_comp_rel per layer"].set_index("layer")
    assert wide.loc[5, "san"] == "0.25 (4/6 <floor)" and wide.loc[4, "san"] == "<floor"
    stats = tables["per-layer statistics of res_comp_rel"].set_index(["variant", "layer"])
    assert stats.loc[("san", 5), "mean"] == "0.25 (4/6 <floor)"
    assert stats.loc[("san", 4), ["mean", "geo_mean"]].tolist() == ["<floor", "<floor"]


def test_doubly_exponential_is_decided_over_seeds_on_the_layers_above_the_floor():
    config = EXP.make_config("quick", OVERRIDES)
    # factors 0.5 and 0.25 (ratio 0.5), then the floor: the floor layer is left out
    found = {c.id: c for c in claims(config, table(san=[1.0, 0.5, 0.125, 1e-16]))}
    claim = found["san-doubly-exponential"]
    assert claim.measured == pytest.approx(0.5) and claim.verdict == "PASS"
    assert claim.n_units == 2 and "seed 0: 0.5, seed 1: 0.5" in claim.note
    geometric = {c.id: c for c in claims(config, table(san=[0.5, 0.25, 0.125, 0.0625]))}
    assert geometric["san-doubly-exponential"].verdict == "FAIL"
    spread = pd.concat([table(seeds=(0,)), table(san=[0.5, 0.25, 0.125, 0.0625], seeds=(1,))])
    claim = {c.id: c for c in claims(config, spread)}["san-doubly-exponential"]
    assert claim.verdict == "NOT TESTED" and claim.n_needed > 2  # the seeds disagree


def test_unknown_variant_names_the_allowed_variants():
    with pytest.raises(ConfigError, match=r"variants.0: Input should be 'san', 'san\+skip'"):
        EXP.make_config("quick", {"variants": ["skip"]})
    with pytest.raises(ConfigError, match="depth.*n_layers"):
        EXP.make_config("quick", {"depth": 4})


def test_a_unit_keeps_no_autograd_graph(monkeypatch):
    """The states are measured, never differentiated: a graph kept for backward took 9 GB (and
    twice the time) per unit at the paper size, so two workers ran out of memory."""
    import rankcollapse.metrics

    seen = []

    def record(states, **kwargs):
        seen.extend(s.requires_grad for s in states)
        return pd.DataFrame()

    monkeypatch.setattr(rankcollapse.metrics, "measure_layers", record)
    EXP.run_unit(
        EXP.make_config("quick", TINY), {"variant": "transformer", "seed": 0, "mlp_gain": 1.0}
    )
    assert seen and not any(seen)
