"""amsel2024-encoder: off-the-shelf transformer encoders on the farthest-point task.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Sec. 7, the experiments with standard encoders (their Fig. 3: error against the number
of heads H at rank d / H, for 1, 3, 5 layers and width multipliers m = 1, 8, 64).
Model: `rankcollapse.nets.RankEncoder` -- torch's own `TransformerEncoderLayer`s, post-norm with
both norms replaced by the unit normalisation x -> g x / ||x||, ReLU MLP, no dropout, raw unit
vectors in and out. H heads per layer have rank d / H (torch ties them); the width multiplier m
puts m attention modules side by side per layer, averaged (m H heads at the same rank). Trained
on fresh samples every step (AdamW, betas (0.9, 0.95), no weight decay, warm-up and cosine
decay, early stop on a plateau); scored by held-out relative MSE. d, N, the MLP width and the
steps are reduced for CPU in the quick preset.

Baselines, measured on the same held-out samples in every run: the zero predictor (relative
MSE 1) and the best predictor that selects nothing, a y_i + b mean_j x_j
(`rankcollapse.tasks.linear_baseline`); the figure draws the latter.

Finding, decided by the one rule (`rankcollapse.experiments.verdicts`) over the seeds:
- rank-beats-heads-and-layers: fewer, wider heads (H from the most to the fewest, so the rank
  per head grows) lower the error more than multiplying the heads by m or adding layers.
  Per seed, at the fewest layers and m = 1, as error ratios (lower = more help): rank gain =
  error(H_min) / error(H_max); head gain = error(H_max, m_max) / error(H_max, 1); layer gain =
  error(H_max, L_max) / error(H_max, L_min). Quantity: rank gain / best other gain; < 1.
  The paper's statement is about full rank, so it presupposes (predicates, NOT TESTED by rule
  when one fails) that the fewest heads are H = 1 (rank d) and that this arm learned: its mean
  error below (1 - `learn_margin`) times the no-selection baseline's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import NOT_LEARNED, Assumption, Claim, Quote, finding
from rankcollapse.plot import band_plot
from rankcollapse.sizes import NHeads, NLayers
from rankcollapse.train import EncoderConfig, train_farthest_encoder

NAME = "amsel2024-encoder"
CELL = ["n_heads", "n_layers", "width_multiplier"]


class Config(EncoderConfig):
    """Stock encoders trained on the farthest-point target, over heads, layers and m."""

    n_points: int = Field(8, ge=2, le=4096)
    """Points per set N."""
    n_heads: list[NHeads] = Field(default_factory=lambda: [2, 4, 8], min_length=1)
    """Heads per attention module (each divides d; rank per head d / H)."""
    n_layers: list[NLayers] = Field(default_factory=lambda: [1, 3], min_length=1)
    """Encoder depths."""
    width_multipliers: list[int] = Field(default_factory=lambda: [1, 8], min_length=1)
    """Parallel attention modules per layer, averaged."""
    learn_margin: float = Field(0.1, ge=0, lt=1)
    """An arm has learned when its error is below (1 - this) x the no-selection baseline's."""


PRESETS: dict[str, dict[str, Any]] = {
    # three seeds for the spread; the heads at both ends of the rank range only: H = 1 (full
    # rank, the paper's claim is about it) and H = 8 (rank 1)
    "quick": {"seeds": [0, 1, 2], "n_heads": [1, 8]},
    "paper": {
        "d_model": 64,
        "n_points": 16,
        "n_heads": [1, 2, 4, 8, 16, 32, 64],
        "n_layers": [1, 3, 5],
        "width_multipliers": [1, 8, 64],
        "d_ff": 2048,
        "seeds": [0, 1, 2, 3, 4],
        "steps": 100_000,
        "batch_size": 256,
        "warmup": 1000,
        "patience": 200,
        "eval_samples": 16384,
    },
}


def units(config: Config) -> list[Unit]:
    return [
        {"n_heads": h, "n_layers": n, "width_multiplier": m, "seed": s}
        for h in config.n_heads
        for n in config.n_layers
        for m in config.width_multipliers
        for s in config.seeds
    ]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    frame = train_farthest_encoder(config, n_points=config.n_points, **unit)
    for key, value in reversed(unit.items()):
        frame.insert(0, key, value)
    frame.insert(1, "d_qk", config.d_model // unit["n_heads"])
    frame["device"] = str(config.device)
    return frame


def gains(config: Config, errors: pd.Series) -> tuple[float, list[float]]:
    """(rank gain, [head gain, layer gain]) from errors indexed by (n_heads, n_layers, m);
    a gain whose cells are missing is NaN."""
    h_min, h_max = min(config.n_heads), max(config.n_heads)
    l_min, l_max = min(config.n_layers), max(config.n_layers)
    m_min, m_max = min(config.width_multipliers), max(config.width_multipliers)
    e = lambda h, n, m: float(errors.get((h, n, m), np.nan))
    base = e(h_max, l_min, m_min)
    others = [e(h_max, l_min, m_max) / base] if m_min < m_max else []
    others += [e(h_max, l_max, m_min) / base] if l_min < l_max else []
    return e(h_min, l_min, m_min) / base, others


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    final = results[results.metric == "eval_rel_mse"]
    several = len(set(config.n_layers)) > 1 or len(set(config.width_multipliers)) > 1
    if not (min(config.n_heads) < max(config.n_heads) and several):
        return []
    per_seed = []
    for seed in config.seeds:
        rank_gain, others = gains(config, final[final.seed == seed].set_index(CELL).value)
        per_seed.append(rank_gain / min(others) if not np.isnan(others).any() else np.nan)
    rank_gain, others = gains(config, final.groupby(CELL).value.mean())
    mean = final.groupby(CELL).value.mean()
    linear = results[results.metric == "linear_rel_mse"].value.mean()
    h, n, m = mean.idxmin() if len(mean) else (np.nan,) * 3
    full = (min(config.n_heads), min(config.n_layers), min(config.width_multipliers))
    full_error = mean.get(full, np.nan)
    assumptions = [
        Assumption(
            "a full-rank arm (H = 1)",
            min(config.n_heads) == 1,
            f"the fewest heads are H={min(config.n_heads)}",
        ),
        Assumption(
            f"{NOT_LEARNED}: the full-rank arm is below {1 - config.learn_margin:.0%} of the "
            "no-selection baseline",
            bool(full_error < (1 - config.learn_margin) * linear),
            f"H=1, {full[1]} layer(s), m={full[2]}: error {full_error:.3g} against {linear:.3g}",
        ),
    ]
    return [
        finding(
            "rank-beats-heads-and-layers",
            says=Quote(
                "one layer succeeds if and only if it is full rank; more heads or more layers do "
                "not close the gap at rank d/H",
                "Sec. 7, Fig. 3",
            ),
            text="raising the rank per head (fewer, wider heads) lowers the error more than "
            f"{max(config.width_multipliers)}x the heads or {max(config.n_layers)} layers",
            quantity="per seed: error ratio from rank / best error ratio from heads or layers "
            "(units: seeds)",
            values=per_seed,
            side="<",
            margin=1.0,  # rank helps more than either other budget
            assumptions=assumptions,
            decides="the quick preset (seeds 0-2; about 70 minutes of units on a 2-core CPU)",
            note=f"mean errors: rank gain {rank_gain:.3g}, "
            f"head/layer gains {', '.join(f'{g:.3g}' for g in others)}; best model (H={h}, "
            f"{n} layer(s), m={m}) error {mean.min():.3g} against {linear:.3g} for the best "
            f"predictor that selects nothing and 1 for the zero predictor; d={config.d_model}, "
            f"N={config.n_points}, {config.steps} steps at most",
        )
    ]


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    final = results[results.metric == "eval_rel_mse"].copy()
    final["model"] = (
        final.n_layers.astype(str) + " layer(s), m=" + final.width_multiplier.astype(str)
    )
    linear = results[results.metric == "linear_rel_mse"].value.mean()
    baseline = pd.DataFrame(
        {"n_heads": config.n_heads, "value": linear, "model": "baseline: a y_i + b mean(x)"}
    )
    figure = band_plot(
        pd.concat([final, baseline], ignore_index=True),
        x="n_heads",
        hue="model",
        logx=True,
        logy=True,
        floor_column=None,
        title=f"d={config.d_model}, N={config.n_points}: error vs heads (rank d/H), all seeds",
        ylabel="held-out relative MSE (zero predictor: 1)",
    )
    for ax in figure.axes:  # one labelled tick per H; no overlapping minor labels
        ax.set_xticks(config.n_heads, [str(h) for h in config.n_heads], minor=False)
        ax.set_xticks([], minor=True)
        ax.set_xlabel("heads H per attention module")
    table = (
        final.groupby(["n_heads", "d_qk", "n_layers", "width_multiplier"])
        .value.agg(["mean", "std", "min", "max", "count"])
        .reset_index()
    )
    zero = results[results.metric == "zero_rel_mse"].value.mean()
    notes = [
        (
            f"Baselines on the same held-out samples: zero predictor {zero:.3g}, best predictor "
            f"that selects nothing (a y_i + b mean_j x_j) {linear:.3g}."
        )
    ]
    return Summary(
        tables={"errors": table},
        figures={"error_vs_heads": figure},
        claims=claims(config, results),
        notes=notes,
    )


register(
    Experiment(
        name=NAME,
        description="Stock transformer encoders: rank per head vs more heads vs depth (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
