"""training-dynamics: arms one option apart, the monitor's rows at every interval, the report's
heat map and curves."""

from __future__ import annotations

from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.training_dynamics import arm_net

TINY = {"n_layers": 2, "d_model": 16, "n_heads": 2, "n_tokens": 8, "n_samples": 2, "steps": 12,
        "every": 4}  # fmt: skip


def test_each_arm_is_one_option_away_from_gpt2s_block():
    config = get_experiment("training-dynamics").make_config("quick")
    base = arm_net(config, "pre-ln", 0).model_dump()
    changed = {arm: {k for k, v in arm_net(config, arm, 0).model_dump().items() if base[k] != v}
               for arm in ("post-ln", "no-skip", "hot")}  # fmt: skip
    assert changed == {"post-ln": {"norm"}, "no-skip": {"skip", "mlp_skip"},
                       "hot": {"temperature"}}  # fmt: skip
    assert arm_net(config, "hot", 0).temperature == 8.0**2 * 16  # T^2 d_qk


def test_the_monitor_records_every_layer_of_every_arm_at_every_interval(run_quick):
    config, results = run_quick("training-dynamics", TINY)
    states = results[results.metric != "train_loss"]
    counts = states.groupby(["arm", "step"]).size()
    assert set(counts.index.get_level_values("step")) == {0, 4, 8, 12}
    assert (counts == 3 * 2 * 3).all()  # layers x samples x metrics
    loss = results[results.metric == "train_loss"]
    assert sorted(loss.step.unique()) == [4, 8, 12] and loss.value.notna().all()
    summary = get_experiment("training-dynamics").summarize(config, results)
    assert {"heatmap", "curves", "loss"} <= set(summary.figures)
    assert not summary.findings  # both are the project's own questions, beyond the papers
    assert {c.id for c in summary.beyond} == {"collapsed-start-trains-slower",
                                              "no-skip-stays-collapsed"}  # fmt: skip
    table = summary.tables["arms"].set_index("arm")
    last = states[(states.layer == 2) & (states.metric == "res_comp_rel")]
    assert (
        table.loc["hot", "initial_res"] == last[(last.arm == "hot") & (last.step == 0)].value.mean()
    )
