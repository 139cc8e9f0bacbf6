"""amsel2024-encoder: off-the-shelf transformer encoders on the farthest-point task.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Sec. 7, the experiments with standard encoders; spec amsel2024.md sec. 3.
Model: `rankcollapse.nets.RankEncoder` -- torch's own `TransformerEncoderLayer`s, post-norm with
both norms replaced by the unit normalisation x -> g x / ||x||, ReLU MLP, no dropout, raw unit
vectors in and out. H heads per layer have rank d / H (torch ties them); the width multiplier m
puts m attention modules side by side per layer, averaged (m H heads at the same rank). Trained
on fresh samples every step (AdamW, betas (0.9, 0.95), no weight decay, warm-up and cosine
decay, early stop on a plateau); scored by held-out relative MSE. d, N, the MLP width and the
steps are reduced for CPU in the quick preset.

Claim (computed from this run):
- rank-beats-heads-and-layers: fewer, wider heads (H from the most to the fewest, so the rank
  per head grows) lower the error more than multiplying the heads by m or adding layers.
  Measured at the smallest layer count and m = 1, as error ratios (lower = more help):
  rank gain = error(H_min) / error(H_max); head gain = error(H_max, m_max) / error(H_max, 1);
  layer gain = error(H_max, L_max) / error(H_max, L_min). Quantity: rank gain / best other
  gain; expected < 1.
"""

from __future__ import annotations

import pandas as pd
from pydantic import Field

from rankcollapse.experiments._amsel import EncoderConfig, train_encoder_unit
from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.plot import band_plot

NAME = "amsel2024-encoder"


class Config(EncoderConfig):
    """Stock encoders trained on the farthest-point target, over heads, layers and m."""

    n_points: int = Field(8, ge=2, le=4096)
    """Points per set N."""
    n_heads: list[int] = Field(default_factory=lambda: [2, 4, 8], min_length=1)
    """Heads per attention module (each divides d; rank per head d / H)."""
    n_layers: list[int] = Field(default_factory=lambda: [1, 3], min_length=1)
    """Encoder depths."""
    width_multipliers: list[int] = Field(default_factory=lambda: [1, 8], min_length=1)
    """Parallel attention modules per layer, averaged."""


PRESETS = {
    "quick": {},
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
    frame = train_encoder_unit(
        config, unit, n_points=config.n_points, width_multiplier=unit["width_multiplier"]
    )
    frame.insert(1, "d_qk", config.d_model // unit["n_heads"])
    return frame


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    final = results[results.metric == "eval_rel_mse"].copy()
    final["model"] = (
        final.n_layers.astype(str) + " layer(s), m=" + final.width_multiplier.astype(str)
    )
    figures = {
        "error_vs_heads": band_plot(
            final,
            x="n_heads",
            hue="model",
            logx=True,
            logy=True,
            floor_column=None,
            title=f"Stock encoders, d={config.d_model}, N={config.n_points}: error vs heads "
            "(rank d/H)",
            ylabel="held-out relative MSE",
        )
    }
    mean = final.groupby(["n_heads", "n_layers", "width_multiplier"]).value.mean()
    h_min, h_max = min(config.n_heads), max(config.n_heads)
    l_min, l_max = min(config.n_layers), max(config.n_layers)
    m_min, m_max = min(config.width_multipliers), max(config.width_multipliers)
    claims = []
    if h_min < h_max and (l_min < l_max or m_min < m_max):
        rank_gain = mean[(h_min, l_min, m_min)] / mean[(h_max, l_min, m_min)]
        others = []
        if m_min < m_max:
            others.append(mean[(h_max, l_min, m_max)] / mean[(h_max, l_min, m_min)])
        if l_min < l_max:
            others.append(mean[(h_max, l_max, m_min)] / mean[(h_max, l_min, m_min)])
        claims.append(
            Claim.check(
                "rank-beats-heads-and-layers",
                "raising the rank per head (fewer, wider heads) lowers the error more than "
                f"{m_max}x the heads or {l_max} layers",
                "error ratio from rank / best error ratio from heads or layers",
                float(rank_gain / min(others)),
                "<",
                1.0,
                note=f"rank gain {rank_gain:.3g}, head/layer gains "
                + ", ".join(f"{g:.3g}" for g in others)
                + f"; d={config.d_model}, N={config.n_points}, {config.steps} steps at most",
            )
        )
    table = (
        final.groupby(["n_heads", "d_qk", "n_layers", "width_multiplier"])
        .value.agg(["mean", "std", "count"])
        .reset_index()
    )
    return Summary(tables={"errors": table}, figures=figures, claims=claims)


register(
    Experiment(
        name=NAME,
        description="Stock transformer encoders: rank per head vs more heads vs depth (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
