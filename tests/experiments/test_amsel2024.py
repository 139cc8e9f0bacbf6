"""The four Amsel et al. 2024 experiments on tiny configs: units, tidy rows, claims computed
from the rows, and the notes a too-short run must carry."""

from __future__ import annotations

import pytest

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.amsel2024_rank_vs_heads import grid_points, resolve_rank


@pytest.fixture
def run(run_quick):
    """(config, results, summary) of an experiment's quick preset with overrides."""

    def run_and_summarize(name: str, overrides: dict):
        config, results = run_quick(name, overrides)
        return config, results, get_experiment(name).summarize(config, results)

    return run_and_summarize


def test_constructions_measure_their_claims_and_the_exact_hardmax_head(run):
    _, results, summary = run(
        "amsel2024-constructions",
        {
            "full_rank_d_models": [4],
            "n_points": 4,
            "temperatures": [1, 100, 1e4],
            "low_rank_d_models": [3, 5],
            "ranks": [1],
            "n_heads": [1, 4],
            "fit_samples": 400,
            "eval_samples": 400,
            "seeds": [0],
        },
    )
    assert list(results.columns[-2:]) == ["metric", "value"]
    claims = {c.id: c for c in summary.claims}
    assert set(claims) == {"full-rank-falls", "full-rank-beats-low-rank", "low-rank-worsens-with-d"}
    assert claims["full-rank-falls"].passed and claims["full-rank-beats-low-rank"].passed
    assert results[results.metric == "rel_mse_hardmax"].value.max() == 0.0
    assert set(summary.figures) == {
        "full_rank_vs_temperature",
        "full_rank_n2_closed_form",
        "low_rank_vs_heads",
    }


def test_rank_vs_heads_grid_pairs_each_rank_with_its_head_budgets():
    config = get_experiment("amsel2024-rank-vs-heads").make_config("quick")
    assert resolve_rank("d/4", 8) == 2 and resolve_rank("d", 8) == 8
    assert grid_points(config, 8) == [(1, 8), (1, 32), (2, 4), (2, 16), (8, 1), (8, 4)]


def test_rank_vs_heads_runs_one_batched_unit_per_width_and_claims_from_it(run):
    config, results, summary = run(
        "amsel2024-rank-vs-heads",
        {"d_models": [4], "steps": 60, "batch_size": 8, "warmup": 5, "eval_samples": 64},
    )
    assert results.columns.tolist() == [
        "d_model",
        "d_qk",
        "n_heads",
        "seed",
        "step",
        "metric",
        "value",
    ]
    final = results[results.metric == "eval_rel_mse"]
    pairs = list(zip(final.d_qk, final.n_heads, strict=True))
    assert sorted(set(pairs)) == sorted(grid_points(config, 4))
    assert len(pairs) == len(grid_points(config, 4)) * len(config.seeds)
    assert {c.id for c in summary.claims} == {
        "full-rank-wins",
        "more-heads-do-not-close-gap",
        "full-rank-aligns",
    }
    assert set(summary.figures) == {"error_vs_heads", "loss_curves"}


@pytest.mark.parametrize(
    ("name", "overrides", "claim"),
    [
        (
            "amsel2024-encoder",
            {
                "d_model": 4,
                "n_points": 3,
                "n_heads": [1, 4],
                "n_layers": [1, 2],
                "width_multipliers": [1, 2],
                "d_ff": 8,
                "steps": 10,
                "eval_samples": 64,
            },
            "rank-beats-heads-and-layers",
        ),
        (
            "amsel2024-depth",
            {
                "d_model": 4,
                "contexts": [2, 5],
                "depths": [1, 2],
                "d_ff": 8,
                "steps": 10,
                "eval_samples": 64,
            },
            "depth-helps-short-more",
        ),
    ],
)
def test_encoder_experiments_train_each_unit_and_measure_the_claim(run, name, overrides, claim):
    config, results, summary = run(name, overrides)
    assert results[results.metric == "eval_rel_mse"].shape[0] == len(
        get_experiment(name).units(config)
    )
    (measured,) = summary.claims
    assert measured.id == claim
    if name == "amsel2024-depth":  # 10 steps cannot show depth benefits: the note says so
        assert "too short to show them" in measured.note
