import pytest

from rankcollapse.errors import ConfigError, UnknownNameError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_path_effectiveness import task_data

EXP = get_experiment("dong2021-path-effectiveness")
TINY = {"n_train": 48, "n_eval": 12, "n_layers": 2, "n_heads": 2, "d_model": 8, "steps": 4}


def _tiny_config(**overrides):
    setups = {
        "sorting": {**TINY, "n_tokens": 8},
        "convex_hull": {**TINY, "n_tokens": 10},
        "memorization": {**TINY, "n_tokens": 8},
    }
    return EXP.make_config("quick", {**setups, "n_repeats": 2, **overrides})


def test_a_unit_reports_the_full_model_first_then_baselines_then_every_length():
    config = _tiny_config(tasks=["sorting"])
    rows = EXP.run_unit(config, EXP.units(config)[0])
    assert rows.iloc[0][["kind", "metric"]].tolist() == ["full", "accuracy"]
    assert set(rows[rows["kind"] == "baseline"]["metric"]) == {"random", "majority"}
    paths = rows[rows["kind"] == "paths"]
    assert len(paths) == 2 * 3 * 2  # n_paths {5, 20} x lengths 0..2 x 2 repeats
    assert paths["value"].between(0, 1).all()
    # The empty path (k = 0) is the same for every sample: no spread over repeats.
    assert paths[paths["length"] == 0]["value"].nunique() == 1

    summary = EXP.summarize(config, rows)
    ids = [claim.id for claim in summary.claims]
    assert ids == [
        f"sorting:{name}"
        for name in (
            "full-learned",
            "best-short",
            "long-near-baseline",
            "more-paths-help",
            "full-beats-paths",
        )
    ]
    assert "accuracy vs path length" in summary.figures


def test_bad_path_settings_and_unknown_tasks_get_clear_errors():
    with pytest.raises(ConfigError, match="n_paths"):
        _tiny_config(n_paths=[0])
    with pytest.raises(ConfigError, match="tasks"):
        _tiny_config(tasks=["sortin"])
    with pytest.raises(ConfigError, match="d_model=10 is not divisible by n_heads=3"):
        EXP.make_config("quick", {"convex_hull": {"d_model": 10, "n_heads": 3}})
    with pytest.raises(UnknownNameError, match="unknown task 'sortin'.*Did you mean 'sorting'"):
        task_data("sortin", 4, seed=0, n_tokens=8)


def test_presets_match_the_paper_sizes():
    paper = EXP.make_config("paper")
    assert (paper.sorting.n_layers, paper.sorting.n_heads, paper.sorting.d_model) == (6, 2, 48)
    assert (paper.convex_hull.n_heads, paper.convex_hull.d_model) == (3, 84)
    assert (paper.sorting.n_tokens, paper.convex_hull.n_tokens) == (8, 10)
    assert paper.n_paths == [5, 20]
