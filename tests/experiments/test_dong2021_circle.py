import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.verdicts import units_needed
from rankcollapse.nets import CircleNet
from rankcollapse.runner.costs import makespan
from rankcollapse.tasks import circle_data, previous_pair_inputs, rollout

sys.path.insert(0, str(Path(__file__).parent / "cases"))
from dong2021_circle import KEPT, MERGING, STAY, run, table, variant

EXP = get_experiment("dong2021-circle")
# CPU seconds of a block of 100 batched seeds per seed and step, at worst (the MLP's), and of a
# run's rollouts and fit (benchmarks/bench_stacked.py; a unit of 40 seeds of the cpu preset)
SECONDS_PER_SEED_STEP, SECONDS_PER_ROLLOUTS = 0.58e-3, 1.2


def _claims(results: pd.DataFrame, **overrides) -> dict:
    config = EXP.make_config("quick", overrides)
    return {c.id: c for c in EXP.claims(config, results)}


def test_the_cpu_preset_keeps_the_authors_layer_and_data_and_trains_longer_on_a_schedule():
    cpu, paper = EXP.make_config("cpu"), EXP.make_config("paper")
    assert cpu.schedule == "cosine" and cpu.warmup > 0 and cpu.steps >= 10 * paper.steps
    kept = ("n_points", "radius", "d_model", "n_heads", "batch_size", "n_steps", "variants")
    assert all(getattr(cpu, key) == getattr(paper, key) for key in kept)
    # the split variants (per-run sd 0.4 around 0.58 on the first six seeds) need about 100
    # learned runs for the one rule's interval to clear one half
    assert len(cpu.seeds) >= units_needed(2, 0.4, 0.08)
    # units of a block of seeds per variant, at the measured cost per seed and step of a
    # block (benchmarks/bench_stacked.py): within 2 hours on 2 cores with --jobs 2
    per_seed = cpu.steps * SECONDS_PER_SEED_STEP + SECONDS_PER_ROLLOUTS
    seconds = [len(u["seeds"]) * per_seed for u in EXP.units(cpu)]
    assert makespan(seconds, 2) <= 2 * 3600 / 2 and len(seconds) >= 2  # an hour: room for load
    assert "The cpu preset" in sys.modules[EXP.run_unit.__module__].__doc__  # its departures


def test_a_unit_trains_its_block_of_seeds_together_each_as_it_would_alone():
    config = EXP.make_config(
        "quick",
        {
            "n_points": 16,
            "d_model": 4,
            "steps": 40,
            "n_steps": 5,
            "n_starts": 2,
            "seeds": [3, 4, 5],
            "seeds_per_unit": 2,
        },
    )
    assert EXP.units(config)[:4] == [
        {"variant": "san", "seeds": [3, 4]},
        {"variant": "san+skip", "seeds": [3, 4]},
        {"variant": "san+mlp", "seeds": [3, 4]},
        {"variant": "san", "seeds": [5]},
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the runner's units
    try:
        together = EXP.run_unit(config, {"variant": "san+mlp", "seeds": [3, 4]})
        alone = [EXP.run_unit(config, {"variant": "san+mlp", "seeds": [s]}) for s in (3, 4)]
    finally:
        torch.set_num_threads(threads)
    alone = pd.concat(alone, ignore_index=True)
    assert together.drop(columns="value").equals(alone.drop(columns="value"))
    assert np.allclose(together["value"], alone["value"], rtol=1e-4, atol=1e-6, equal_nan=True)


def test_merges_count_only_runs_whose_fit_beats_predicting_the_input():
    # Two runs merge off the arcs; the first fit is worse than predicting the input.
    results = table(
        run("san", 0, MERGING, mse=3 * STAY), run("san", 1, MERGING, mse=0.5 * STAY),
        run("san", 2, MERGING),
    )  # fmt: skip
    claim = _claims(results, variants=["san"])["pure-merges"]  # seeds 1 and 2: 3/4 each
    assert claim.measured == pytest.approx(3 / 4) and claim.verdict == "PASS"
    assert "seed 0: train MSE 6.00e-06 vs input 2.00e-06 (not learned)" in claim.note
    assert "seed 1: train MSE 1.00e-06 vs input 2.00e-06, from the first pair x1" in claim.note
    assert "off the arcs 75% merged, 25% apart of 4" in claim.note


def test_runs_that_disagree_around_one_half_decide_nothing():
    # the cpu run's shares: 2, 8 and 4 of 8 merged (25 %, 100 %, 50 %): mean 0.58, standard
    # error 0.22 over the seeds
    offs = [[1e-6, 1e-6] + [1.0] * 6, [1e-6] * 8, [1e-6] * 4 + [1.0] * 4]
    eight = {"diverged": (False,) * 8}
    claim = _claims(variant("san", offs, **eight), variants=["san"], n_starts=8)["pure-merges"]
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("preset too small")
    assert "mean 0.583" in claim.untested and "over 3 units" in claim.untested
    assert claim.n_needed > 3 and "--preset cpu" in claim.untested
    agreeing = [[1e-6] * 6 + [1.0] * 2, [1e-6] * 7 + [1.0], [1e-6] * 6 + [1.0] * 2]  # 75, 88, 75 %
    claims = _claims(variant("san", agreeing, **eight), variants=["san"], n_starts=8)
    assert claims["pure-merges"].verdict == "PASS"


def test_the_first_pair_decides_nothing_the_off_arc_rollouts_do():
    on_arcs_only = variant("san", [[1.0] * 4] * 3, first=1e-6)  # merges on the arcs only
    assert _claims(on_arcs_only, variants=["san"])["pure-merges"].verdict == "FAIL"


def test_an_untrained_layer_that_merges_supports_no_finding():
    merged_unlearned = variant("san", [MERGING] * 3, mse=10 * STAY)
    claim = _claims(merged_unlearned, variants=["san"])["pure-merges"]
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("assumptions not met")
    assert "none of 3 runs beat predicting the input" in claim.untested
    apart_unlearned = variant("san+skip", [KEPT] * 3, mse=10 * STAY)
    claim = _claims(apart_unlearned, variants=["san+skip"])["skip-keeps-apart"]
    assert claim.verdict == "NOT TESTED"


def test_a_diverged_rollout_or_missing_run_never_counts_as_kept_apart():
    gone = (True, False, False, False)
    results = table(run("san+skip", 0, [50.0, 1.0, 1.0, 1.0], diverged=gone),
                    run("san+skip", 1, KEPT))  # fmt: skip
    claim = _claims(results, variants=["san+skip"], seeds=[0, 1, 2])["skip-keeps-apart"]
    assert claim.measured == pytest.approx(3 / 4) and claim.verdict == "PASS"  # seed 2 missing
    claim = _claims(results, variants=["san+skip"], seeds=[0, 1, 2, 3, 4])["skip-keeps-apart"]
    assert claim.verdict == "PASS"  # missing runs count for nothing, and the note says so
    assert "3 of 5 runs did not learn" in claim.note and "seed 2: missing" in claim.note


def test_apart_means_did_not_merge_whatever_the_distance():
    claims = _claims(variant("san+mlp", [[0.11, 5.0, 20.0, 0.09]]), variants=["san+mlp"],
                     seeds=[0])  # fmt: skip
    assert claims["mlp-keeps-apart"].measured == pytest.approx(3 / 4)


def test_the_authors_skip_trains_on_the_pair_plus_the_previous_batch_and_sums_its_rollout():
    data = circle_data(16, radius=0.3)  # 7 pairs
    shifted = previous_pair_inputs(data, 3)
    assert torch.equal(shifted.inputs[:3], data.inputs[:3])
    assert torch.allclose(shifted.inputs[5], data.inputs[5] + data.inputs[2])
    net = CircleNet("san+skip", d_model=8, seed=1, skip="authors")
    pure = CircleNet("san", d_model=8, seed=1)
    assert torch.equal(net(data.inputs), pure(data.inputs))  # the module is f alone
    path = rollout(lambda x: 0.5 * x, torch.ones(1, 2, 2), 3, radius=1.0, accumulate=True)
    # s = 1, 1.5, 2.25; recorded f(s) = 0.5, 0.75, 1.125
    assert path[1:, 0, 0, 0].tolist() == [0.5, 0.75, 1.125]


def test_a_unit_records_trajectories_and_the_runs_table_its_outcome(run_quick):
    overrides = {"n_points": 16, "d_model": 4, "steps": 3, "n_steps": 5, "seeds": [0],
                 "n_starts": 2}  # fmt: skip
    config, rows = run_quick(EXP.name, overrides)
    start = rows[(rows["step"] == 0) & (rows["metric"] == "distance")]["value"]
    off = rows[(rows["start"] > 0) & (rows["metric"] == "relative_final_distance")]
    assert len(off) == 3 * 2 and off["step"].isna().all()  # two off-arc rollouts per run
    expected = 2 * 0.3 * np.cos(np.pi / 16)  # p_0 and p_7 of 16 points: one step short of opposite
    assert np.allclose(start, expected, atol=1e-6) and len(start) == 3
    assert set(rows["device"]) == {"cpu"}
    distance = rows[rows["metric"] == "distance"].set_index(["variant", "step"])["value"]
    first = rows[(rows["metric"] == "relative_final_distance") & (rows["start"] == 0)]
    finals = first.set_index("variant")["value"]
    for name in ("san", "san+skip", "san+mlp"):
        assert finals[name] == pytest.approx(distance[name, 5] / distance[name, 0])
    summary = EXP.summarize(config, rows)
    runs = summary.tables["runs: fit, final distance and outcome"].set_index("variant")
    assert (runs["learned"] == (runs["train_mse"] < runs["baseline_mse_stay"])).all()
    assert set(summary.figures) == {
        "token trajectories",
        "off-arc outcome share per run (what the findings read)",
        "token distance over the recurrent steps",
    }


def test_a_diverging_start_stops_and_leaves_nan_while_the_others_go_on():
    starts = torch.stack([torch.ones(2, 2), torch.zeros(2, 2)])  # the second never moves
    trajectory = rollout(lambda points: 2 * points, starts, 20, radius=1.0)
    assert trajectory.shape == (21, 2, 2, 2)
    assert np.isfinite(trajectory[:7, 0]).all() and np.isnan(trajectory[7:, 0]).all()
    assert np.array_equal(trajectory[3, 0], np.full((2, 2), 8.0))
    assert np.array_equal(trajectory[:, 1], np.zeros((21, 2, 2)))


def test_bad_settings_get_clear_errors():
    with pytest.raises(ConfigError, match="variants"):
        EXP.make_config("quick", {"variants": ["pure"]})
    with pytest.raises(ConfigError, match="device"):
        EXP.make_config("quick", {"device": "gpu"})


def test_a_finding_note_sums_up_many_runs_and_names_the_missing_seeds():
    import numpy as np
    import pandas as pd

    from rankcollapse.experiments.dong2021_circle import RUNS_NAMED, _run_note

    run = {"train_mse": 1e-7, "baseline_mse_stay": 1.78e-6, "diverged": 0.0, "learned": True,
           "relative_final_distance": 0.5, "off_arc_merged": 0.25, "off_arc_apart": 0.75,
           "off_arcs": 8}  # fmt: skip
    part = pd.DataFrame([run] * (RUNS_NAMED + 2), index=range(RUNS_NAMED + 2), dtype=float)
    part.loc[3] = np.nan
    note = _run_note(part)
    assert note.startswith(f"{RUNS_NAMED + 1} runs: train MSE 1.00e-07 to 1.00e-07")
    assert "25% merged, 75% apart on average" in note
    assert note.endswith("missing: seed 3")
    assert _run_note(part.iloc[:2]).startswith("seed 0: train MSE 1.00e-07 vs input 1.78e-06")
