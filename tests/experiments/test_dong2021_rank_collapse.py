"""dong2021-rank-collapse: units, a tiny real run, claims computed from the results."""

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import dong2021_rank_collapse as exp
from rankcollapse.experiments import get_experiment

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
            "random_layers": 3,
        },
    )
    results = pd.concat([EXP.run_unit(config, u) for u in EXP.units(config)], ignore_index=True)
    assert set(results["variant"]) == {"san", "san+mlp", "san+skip", "transformer"}
    assert sorted(results["layer"].unique()) == [0, 1, 2, 3]
    summary = EXP.summarize(config, results)
    by_id = {c.id: c for c in summary.claims}
    assert set(by_id) == {"init-san-collapses", "init-skip-stays"}  # no pretrained arm here
    assert by_id["init-san-collapses"].passed and by_id["init-skip-stays"].passed
    assert "residual vs layer" in summary.figures


def synthetic(rows):
    """Results from {(model, init, variant): [mean per layer]} (two samples each, no spread)."""
    records = []
    for (model, init, variant), values in rows.items():
        for layer, value in enumerate(values):
            for sample in range(2):
                records.append(
                    {
                        "model": model,
                        "init": init,
                        "variant": variant,
                        "layer": layer,
                        "layer_kind": "block",
                        "sample": sample,
                        "metric": "res_comp_rel",
                        "value": value,
                        "at_floor": value < 1e-6,
                        "quantized": "no",
                    }
                )
    return pd.DataFrame(records)


def test_claims_fail_when_the_pretrained_san_never_collapses():
    table = exp.layer_means(
        synthetic(
            {
                ("minilm", "pretrained", "san"): [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.5, 0.5],
                ("minilm", "pretrained", "transformer"): [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
                ("bert-base", "random", "san"): [0.6, 1e-3, 1e-7],
                ("bert-base", "random", "san+skip"): [0.6, 0.6, 0.01],
            }
        )
    )
    by_id = {c.id: c for c in exp.claims(table)}
    assert not by_id["pretrained-san-collapses"].passed
    assert by_id["pretrained-san-collapses"].measured == float("inf")
    assert by_id["pretrained-transformer-keeps"].passed
    assert by_id["init-san-collapses"].passed
    assert not by_id["init-skip-stays"].passed  # 0.01 at the last layer


def test_causal_decoders_are_reported_in_notes_not_in_the_encoder_claims():
    config = EXP.make_config(
        "quick",
        {
            "arms": [
                {"model": "minilm", "init": "pretrained"},
                {"model": "smollm2", "init": "pretrained"},
            ]
        },
    )
    late = [1.0] + [0.5] * 12 + [1e-3] * 18  # 30 layers, below 0.01 from layer 13
    results = synthetic(
        {
            ("minilm", "pretrained", "san"): [1.0, 0.7, 0.4, 0.06, 3e-4, 2e-7, 1e-7],
            ("minilm", "pretrained", "transformer"): [1.0, 0.9, 0.9, 0.8, 0.8, 0.6, 0.9],
            ("smollm2", "pretrained", "san"): late,
            ("smollm2", "pretrained", "transformer"): [1.0] * 31,
        }
    )
    summary = EXP.summarize(config, results)
    by_id = {c.id: c for c in summary.claims}
    assert by_id["pretrained-san-collapses"].passed
    assert by_id["pretrained-san-collapses"].measured == 4.0  # MiniLM only
    assert any("smollm2: 13 of 30" in note for note in summary.notes)
