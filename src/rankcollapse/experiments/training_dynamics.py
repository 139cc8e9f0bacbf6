"""training-dynamics: how collapse at initialisation evolves while a small language model trains.

Not one of the three seed papers' experiments: it asks the question they leave open (does the
collapse a network starts with slow its training, and does training undo it?) with the
monitor (`rankcollapse.measure.monitor`) on a small GPT-2-shaped model (`rankcollapse.nets.CausalLM`:
causal attention, GELU MLP of width 4 d_model, learned positions, final LayerNorm) trained by
the project's loop (Adam) on next-byte prediction of the built-in corpus
(`rankcollapse.tasks.byte_windows`; the held-out tenth gives the monitor's batch). Arms differ
only in what the papers vary, one option each from GPT-2's block (skip on, pre-LN, T = 1):

- pre-ln: GPT-2's block;
- post-ln: the norm after the skip sum (Vaswani et al.; BERT);
- no-skip: neither the attention nor the MLP has a skip (Dong et al. 2021's SAN + MLP + LN);
- hot: softmax temperature `hot_temperature` (logits / (T sqrt(d_qk))), flatter attention.

Every `every` steps the monitor records res_comp_rel, mu_rel and stable_rank of every layer on
the held-out batch; the training loss is averaged over each interval.

Findings, both beyond the papers (the project's own questions, listed apart), each decided by
the one rule (`rankcollapse.experiments.verdicts`) over the seeds (the quantity reads the last
layer's res_comp_rel, mean over held-out samples):
- collapsed-start-trains-slower (after Noci et al. 2022, "Signal propagation in transformers:
  theoretical perspectives and the role of rank collapse", NeurIPS, arXiv 2206.03126: rank
  collapse at initialisation makes the gradients of queries and keys vanish and hinders
  training): per seed, the Spearman correlation across arms between the initial res_comp_rel
  and the mean training loss over the first `early_share` of the steps is negative.
- no-skip-stays-collapsed (after Dong et al. 2021, Sec. 4: removing the skips from trained
  networks collapses them; Thm 2.2 bounds a pure SAN's residual for weights where the bound is
  informative, and says nothing of training): per seed, the no-skip arm's final res_comp_rel
  over the smallest final res_comp_rel of the arms with skips is < 1.
The quick preset trains one seed (no spread: NOT TESTED); three seeds at quick decide (12 units
of about 200 s each on a loaded 2-core machine; the paper preset is far slower).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register, toy_sizes
from rankcollapse.experiments.verdicts import Claim, Quote, finding
from rankcollapse.measure.monitor import MemoryLog, watch
from rankcollapse.nets import CausalLM, NetConfig
from rankcollapse.plot import line_plot, training_curves, training_heatmap
from rankcollapse.seeds import stream_seed
from rankcollapse.sizes import BatchSize
from rankcollapse.tasks import VOCAB_SIZE, byte_windows, unigram_loss
from rankcollapse.train import TrainConfig, train

NAME = "training-dynamics"
Arm = Literal["pre-ln", "post-ln", "no-skip", "hot"]
METRIC = "res_comp_rel"
OUTSIDE = "from outside the three seed papers"


class Config(
    toy_sizes(n_layers=4, n_heads=4, d_model=64, n_tokens=32, n_samples=8)  # type: ignore[misc]
):
    """Arms of a small GPT-2-shaped model trained on next-byte prediction of the corpus."""

    arms: list[Arm] = Field(["pre-ln", "post-ln", "no-skip", "hot"], min_length=1)
    """Arms (each one option away from GPT-2's block)."""
    hot_temperature: float = Field(8.0, gt=1.0, allow_inf_nan=False)
    """Softmax temperature T of the hot arm: logits / (T sqrt(d_qk))."""
    steps: int = Field(400, ge=1)
    """Adam steps."""
    batch_size: BatchSize = 16
    """Windows per step."""
    lr: float = Field(1e-3, gt=0)
    """Adam learning rate."""
    every: int = Field(50, ge=1)
    """Steps between two measurements of the monitor (and the loss intervals)."""
    early_share: float = Field(0.25, gt=0, le=1)
    """The first part of training whose mean loss says how fast an arm starts."""
    seeds: list[int] = Field([0], min_length=1)
    """Weight seeds (the batch order comes from the data stream of the same seed)."""


PRESETS = {
    "quick": {},
    "paper": {
        "n_layers": 6,
        "d_model": 256,
        "n_tokens": 64,
        "n_samples": 16,
        "steps": 3000,
        "batch_size": 32,
        "seeds": [0, 1, 2],
    },
}


def units(config: Config) -> list[Unit]:
    return [{"arm": arm, "seed": seed} for arm in config.arms for seed in config.seeds]


def arm_net(config: Config, arm: Arm, seed: int) -> NetConfig:
    """GPT-2's block (skip on, pre-LN, T = 1) with the one change of `arm`."""
    d_qk = config.d_model // config.n_heads
    changes: dict[Arm, dict[str, object]] = {
        "pre-ln": {},
        "post-ln": {"norm": "post"},
        "no-skip": {"skip": "off", "mlp_skip": False},
        "hot": {"temperature": config.hot_temperature**2 * d_qk},  # scale 1/sqrt(T^2 d_qk)
    }
    change = changes[arm]
    gpt2: dict[str, Any] = {
        "skip": "on",
        "norm": "pre",
        "mlp": True,
        "activation": "gelu",
        "mask": "causal",
        "bias": True,
        "dtype": "float32",
    }
    sizes = {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model}
    return NetConfig.model_validate(
        {**gpt2, **change, **sizes, "seed": stream_seed(seed, "weights")}
    )


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    model = CausalLM(
        arm_net(config, unit["arm"], unit["seed"]),
        vocab_size=VOCAB_SIZE,
        n_positions=config.n_tokens,
    )
    inputs, targets = byte_windows(config.n_tokens, part="train")
    held_out, _ = byte_windows(config.n_tokens, part="held_out", n_samples=config.n_samples)
    log = MemoryLog()
    monitor = watch(model, blocks="body.blocks", inputs=held_out, every=config.every, logs=[log])
    schedule = TrainConfig(
        steps=config.steps,
        batch_size=config.batch_size,
        lr=config.lr,
        seed=stream_seed(unit["seed"], "data"),
    )
    losses = np.asarray(train(model, inputs, targets, schedule, monitor=monitor))
    ends = range(config.every, config.steps + 1, config.every)
    loss = pd.DataFrame(
        {
            "step": list(ends),
            "metric": "train_loss",
            "value": [losses[end - config.every : end].mean() for end in ends],
        }
    )
    frame = pd.concat([log.frame, loss], ignore_index=True)
    frame.insert(0, "seed", unit["seed"])
    frame.insert(0, "arm", unit["arm"])
    return frame


def arm_table(config: Config, results: pd.DataFrame) -> pd.DataFrame:
    """Per arm: the last layer's res_comp_rel at the first and the last measured step, the
    early and final training loss (means over samples, steps in the part, seeds); NaN where
    an arm has no rows."""
    states = results[(results.metric == METRIC) & (results.layer == config.n_layers)]
    loss = results[results.metric == "train_loss"]
    early = loss[loss.step <= max(config.every, config.early_share * config.steps)]
    table = pd.DataFrame(index=pd.Index(config.arms, name="arm"))
    table["initial_res"] = states[states.step == 0].groupby("arm").value.mean()
    final_step = states.groupby("arm").step.transform("max")
    table["final_res"] = states[states.step == final_step].groupby("arm").value.mean()
    table["early_loss"] = early.groupby("arm").value.mean()
    final_loss = loss[loss.step == loss.groupby("arm").step.transform("max")]
    table["final_loss"] = final_loss.groupby("arm").value.mean()
    return table


NOCI = Quote(
    "rank collapse of the tokens' representations hinders training by causing the gradients of "
    "the queries and keys to vanish at initialization",
    "Noci et al. 2022, abstract",
)
DONG = Quote(
    "as soon as the skip connections are removed, all networks exhibit a rapid rank collapse",
    "Dong et al. 2021, Sec. 4 (skips removed from trained networks)",
)
DECIDES = "--preset quick --set seeds=[0,1,2] (12 units of about 200 s: some 20 min on 2 cores)"


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    """Both findings beyond the papers, decided by the one rule over the seeds."""
    table = arm_table(config, results)
    states = results[(results.metric == METRIC) & (results.layer == config.n_layers)]
    found = []
    if len(config.arms) >= 3:
        rho = {
            seed: _rho(arm_table(config, results[results.seed == seed])) for seed in config.seeds
        }
        found.append(
            finding(
                "collapsed-start-trains-slower",
                says=NOCI,
                text="arms whose representations start more collapsed train more slowly",
                quantity=f"Spearman correlation over "
                f"{len(config.arms)} arms of the last layer's initial res_comp_rel and the mean "
                f"training loss of the first {config.early_share:g} of the steps, per seed",
                values=list(rho.values()),
                side="<",
                margin=0.0,
                decides=DECIDES,
                beyond=True,
                note=f"{OUTSIDE}; per seed: "
                + ", ".join(f"{s}: {r:+.2f}" for s, r in rho.items())
                + "; per arm (initial res_comp_rel, early loss): "
                + ", ".join(
                    f"{arm} ({r.initial_res:.3g}, {r.early_loss:.3g})"
                    for arm, r in table.iterrows()
                ),
            )
        )
    skips = [arm for arm in config.arms if arm != "no-skip"]
    if "no-skip" in config.arms and skips:
        per_seed = {}
        for seed in config.seeds:
            rows = states[(states.seed == seed) & (states.step == states.step.max())]
            final = rows.groupby("arm").value.mean().reindex(config.arms)
            per_seed[seed] = final["no-skip"] / final[skips].min(skipna=False)
        found.append(
            finding(
                "no-skip-stays-collapsed",
                says=DONG,
                text="trained without skip connections, the "
                "network ends more collapsed: its last layer below every arm with skips",
                quantity="the no-skip arm's final res_comp_rel / the smallest final res_comp_rel "
                f"of {', '.join(skips)}, per seed",
                values=list(per_seed.values()),
                side="<",
                margin=1.0,
                decides=DECIDES,
                beyond=True,
                note=", ".join(f"seed {s}: {r:.3g}" for s, r in per_seed.items())
                + f"; the no-skip arm from {table.initial_res.get('no-skip', np.nan):.3g} to "
                f"{table.final_res.get('no-skip', np.nan):.3g} after {config.steps} steps; Dong et "
                "al. remove the skips from trained networks, this row trains without them",
            )
        )
    return found


def _rho(table: pd.DataFrame) -> float:
    """Spearman correlation of an arm table's initial residual and early loss: the Pearson
    correlation of their ranks (ties at their average rank); NaN when an arm has no rows
    (fewer points than arms) or a column is constant."""
    if not table[["initial_res", "early_loss"]].notna().all().all():
        return np.nan
    return float(table.initial_res.rank().corr(table.early_loss.rank()))


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    states = results[results.metric != "train_loss"]
    loss = results[results.metric == "train_loss"]
    title = f"{config.n_layers} layers, d={config.d_model}, {config.steps} steps"
    figures = {
        "heatmap": training_heatmap(states, metric=METRIC, panel="arm", title=title),
        "curves": training_curves(states, metric=METRIC, panel="arm", title=title),
        "loss": line_plot(loss, x="step", hue="arm", title=title, ylabel="loss (nats per byte)"),
    }
    baseline = unigram_loss()
    notes = [
        (
            f"Context-free baseline (training bytes' frequencies) on the held-out bytes: "
            f"{baseline:.3g} nats per byte; training losses are means over each interval of "
            f"{config.every} steps."
        )
    ]
    return Summary(
        tables={"arms": arm_table(config, results).reset_index()},
        figures=figures,
        claims=claims(config, results),
        notes=notes,
    )


register(
    Experiment(
        name=NAME,
        description="Collapse over training of a small GPT-2-shaped model: skip, norm position "
        "and temperature arms (monitor)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
