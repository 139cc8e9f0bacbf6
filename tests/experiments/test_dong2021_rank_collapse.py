"""dong2021-rank-collapse: units, a tiny real run, claims computed from the results."""

import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import dong2021_rank_collapse as exp
from rankcollapse.experiments import get_experiment
from rankcollapse.theory import layers_above

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from dong2021_rank_collapse import SMOLLM2_SAN, table

EXP = get_experiment("dong2021-rank-collapse")


def test_units_are_one_per_model_and_init_with_all_variants_inside():
    config = EXP.make_config("quick")
    assert EXP.units(config) == [
        {"model": "minilm", "init": "pretrained"},
        {"model": "smollm2", "init": "pretrained"},
        {"model": "minilm", "init": "random"},
        {"model": "bert-base", "init": "random"},
    ]
    paper = EXP.make_config("paper")
    assert (paper.n_samples, paper.n_tokens) == (32, 128)
    assert {a.model for a in paper.arms} >= {
        "bert-base",
        "albert-base",
        "xlnet-base",
        "minilm",
        "smollm2",
    }


def test_config_typos_fail_before_any_unit_runs():
    with pytest.raises(ConfigError, match="variants"):
        EXP.make_config("quick", {"variants": ["san", "san+mpl"]})
    with pytest.raises(ConfigError, match="arms"):
        EXP.make_config("quick", {"arms": [{"model": "minilm6", "init": "random"}]})


@pytest.mark.slow  # imports transformers and builds a model (~5-30 s on a loaded machine)
def test_tiny_real_run_collapses_without_skip_and_summarizes():
    config = EXP.make_config(
        "quick",
        {
            "arms": [{"model": "minilm", "init": "random"}],
            "n_samples": 3,
            "n_tokens": 16,
            "n_layers": 3,
        },
    )
    results = pd.concat([EXP.run_unit(config, u) for u in EXP.units(config)], ignore_index=True)
    assert set(results["variant"]) == {"san", "san+mlp", "san+skip", "transformer"}
    assert set(results["device"]) == {"cpu"}
    assert sorted(results["layer"].unique()) == [0, 1, 2, 3]
    summary = EXP.summarize(config, results)
    by_id = {c.id: c for c in summary.claims}
    assert set(by_id) == {"init-san-collapses", "init-skip-stays"}  # no pretrained arm here
    assert by_id["init-san-collapses"].passed and by_id["init-skip-stays"].passed
    assert "residual vs layer" in summary.figures


def test_findings_are_decided_over_windows():
    config = EXP.make_config("quick")
    by_id = {c.id: c for c in exp.claims(config, table())}
    assert by_id["init-san-collapses"].measured == pytest.approx(2e-6)  # deciding: bert-base
    assert by_id["init-skip-stays"].measured == pytest.approx(0.4 / 0.5)  # bert-base, layer 2
    assert by_id["pretrained-san-collapses"].measured == 3 - 5  # MiniLM at layer 3, handful 5
    assert by_id["pretrained-decoder-san-collapses"].measured == 3 - 5  # 3 layers: handful 5
    assert by_id["pretrained-transformer-keeps"].measured == pytest.approx(0.5)
    assert all(c.n_units == 2 and c.verdict == "PASS" for c in by_id.values())
    assert by_id["pretrained-san-collapses"].paper.startswith("as soon as the skip connections")
    beyond = {i for i, c in by_id.items() if c.kind == "beyond"}
    assert beyond == {"pretrained-decoder-san-collapses"}  # a decoder: outside the paper


def test_report_tables_show_the_floor_share_and_claims_read_the_same_means():
    config = EXP.make_config("quick")
    results = table()
    results.loc[(results["variant"] == "san") & (results["sample"] == 1), "at_floor"] = True
    tables = EXP.summarize(config, results).tables
    wide = tables["mean res_comp_rel per layer"].set_index(["model", "init", "layer"])
    san = results[results["variant"] == "san"].iloc[0]
    cell = wide.loc[(san["model"], san["init"], san["layer"]), "san"]
    assert cell in {f"{san['value']:.3g} (1/2 <floor)", "<floor"}
    assert all("<floor" in c for c in wide["san"])
    stats = tables["per-layer statistics of res_comp_rel"]
    assert all("<floor" in c for c in stats.loc[stats["variant"] == "san", "mean"])
    assert exp.claims(config, results) == exp.claims(config, table())  # means, not cells


def test_a_handful_is_a_number_of_layers_and_grows_with_depth_past_the_papers_12():
    late = table({("minilm", "pretrained", "san"): [1.0, 0.7, 0.4, 0.06, 3e-2, 2e-3, 1e-7]})
    strict, loose = (EXP.make_config("quick", {"handful": h}) for h in (4, 5))
    claim = {c.id: c for c in exp.claims(strict, late)}["pretrained-san-collapses"]
    assert claim.verdict == "FAIL" and "minilm: 6 layers, a handful = 4" in claim.note
    assert {c.id: c for c in exp.claims(loose, late)}["pretrained-san-collapses"].passed
    assert exp.handful_for(loose, 6) == 5 and exp.handful_for(loose, 30) == 12.5


def test_every_pretrained_model_decides_san_collapse_and_a_missing_one_fails():
    config = EXP.make_config("quick")
    late = table({("smollm2", "pretrained", "san"): SMOLLM2_SAN})  # below 0.01 at 13 of 30
    by_id = {c.id: c for c in exp.claims(config, late)}
    assert by_id["pretrained-san-collapses"].verdict == "PASS"  # the encoder, the paper's setting
    claim = by_id["pretrained-decoder-san-collapses"]
    assert claim.kind == "beyond" and claim.measured == 13 - 12.5
    assert claim.verdict == "FAIL"  # two identical windows at the margin: no spread, not within
    assert "smollm2: 30 layers, a handful = 12.5" in claim.note
    gone = table(drop=(("smollm2", "pretrained", "san"),))
    claim = {c.id: c for c in exp.claims(config, gone)}["pretrained-decoder-san-collapses"]
    assert claim.verdict == "FAIL" and "smollm2/san: missing" in claim.note
    never = table({("smollm2", "pretrained", "san"): [1.0, float("nan"), float("nan"), 0.1]})
    claim = {c.id: c for c in exp.claims(config, never)}["pretrained-decoder-san-collapses"]
    assert claim.verdict == "FAIL" and "NaN or diverged" in claim.note
    excluded = EXP.make_config("quick", {"san_excluded": {"smollm2": "causal decoder"}})
    claim = {c.id: c for c in exp.claims(excluded, late)}["pretrained-decoder-san-collapses"]
    assert claim.verdict == "NOT TESTED"  # its one member excluded: nothing left to decide
    assert "excluded by config (1): smollm2/san (causal decoder)" in claim.note


def test_a_missing_model_fails_a_for_every_finding():
    results = table(drop=(("bert-base", "random", "san"),))
    claim = {c.id: c for c in exp.claims(EXP.make_config("quick"), results)}
    assert claim["init-san-collapses"].verdict == "FAIL"
    assert "bert-base/san: missing" in claim["init-san-collapses"].note


def test_the_notes_name_the_arms_run_and_the_causal_decoders():
    config = EXP.make_config("quick")
    summary = EXP.summarize(config, table())
    assert summary.notes[0].startswith(
        "Arms run: minilm (pretrained), smollm2 (pretrained), minilm (random), bert-base (random)"
    )
    assert not any("smollm2" in note for note in summary.notes[1:])  # in the finding now


def test_a_residual_above_one_is_explained_with_mu_rel_and_stable_rank():
    results = table({("smollm2", "pretrained", "transformer"): [1.0, 1.2, 1.3, 0.5]})
    extra = results[results["model"] == "smollm2"].assign(value=0.9)
    results = pd.concat([results, extra.assign(metric="mu_rel"),
                         extra.assign(metric="stable_rank", value=1.1)])  # fmt: skip
    high = layers_above(results, "res_comp_rel", 1.0, by=("model", "init", "variant"))
    assert high[["model", "variant", "layer"]].values.tolist() == [
        ["smollm2", "transformer", 1],
        ["smollm2", "transformer", 2],
    ]
    assert high["res_comp_rel"].tolist() == [1.2, 1.3]
    assert high["mu_rel"].tolist() == [0.9, 0.9] and high["stable_rank"].tolist() == [1.1, 1.1]


def test_authors_variants_are_accepted_per_arm_and_typos_are_not():
    arm = {"model": "albert-base", "init": "random", "variants": ["san", "dong-authors:san"]}
    config = EXP.make_config("quick", {"arms": [arm]})
    assert config.arms[0].variants == ["san", "dong-authors:san"]
    with pytest.raises(ConfigError, match="dong-authors:sna"):
        EXP.make_config("quick", {"arms": [{**arm, "variants": ["dong-authors:sna"]}]})
    paper = EXP.make_config("paper")
    albert = next(a for a in paper.arms if a.model == "albert-base")
    assert "dong-authors:san+skip" in albert.variants and "san+skip" in albert.variants


def test_a_bfloat16_model_is_measured_in_float64_and_flagged_at_its_own_floor():
    overrides = {"arms": [{"model": "minilm", "init": "random"}], "n_samples": 2, "n_tokens": 8,
                 "n_layers": 2, "variants": ["san", "transformer"], "dtype": "bfloat16"}  # fmt: skip
    config = EXP.make_config("quick", overrides)
    results = EXP.run_unit(config, EXP.units(config)[0])
    last = results[(results["layer"] == 2) & (results["metric"] == "res_comp_rel")]
    san = last[last["variant"] == "san"]
    assert results["value"].notna().all()
    # bfloat16's floor (10 eps = 0.078 relative) is far above float32's: the collapsed pure
    # attention network is at it, the transformer is not
    assert san["at_floor"].all()
    assert not last[last["variant"] == "transformer"]["at_floor"].any()


def test_decoders_and_models_come_from_the_registry():
    from rankcollapse.hf import MODELS

    assert exp.decoders(["minilm", "gpt2", "smollm2", "gpt2", "bert-base"]) == ["gpt2", "smollm2"]
    causal = [name for name, spec in MODELS.items() if spec.causal]
    config = EXP.make_config("quick", {"arms": [{"model": m, "init": "random"} for m in causal]})
    assert [a.model for a in config.arms] == causal
    assert exp.decoders(a.model for a in config.arms) == causal


def test_the_figure_draws_collapse_on_a_log_axis_with_the_float32_floor():
    """1e-3 next to 1 reads as 0 on a linear axis: the residual spans decades, so log."""
    from rankcollapse.metrics import dtype_floor

    figure = EXP.summarize(EXP.make_config("quick"), table()).figures["residual vs layer"]
    axes = [ax for ax in figure.axes if ax.get_visible()]
    assert axes and all(ax.get_yscale() == "log" for ax in axes)
    floor = dtype_floor(EXP.make_config("quick").dtype)
    lines = [ln for ax in axes for ln in ax.get_lines() if list(ln.get_ydata()) == [floor] * 2]
    assert lines  # the floor line sits at the float32 floor, the relative metric's own floor
