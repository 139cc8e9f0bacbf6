"""wu2024-rates: measured exponential collapse rate per attention mask against Wu et al.'s bound.

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, NeurIPS 2024 (arXiv 2405.18781), Thm 1 and Cor 1
(spec wu2024.md sec. 1, 3). For a quasi-strongly connected mask of radius r whose allowed
attention weights all stay >= eps: mu(X^t) <= C (1 - eps^r)^{t/r} without LayerNorm; with Wu's
LayerNorm (each token scaled to unit norm), orthogonal W_V and n center nodes:
mu(X^t) <= C (1 - n eps^{2r})^{t/(2r)}.

Network: a pure masked SAN (`ToyNet`, one head, orthogonal value-output weights so that mu
changes only through the attention), without norm ("none") and with the unit norm ("unit",
post), for each mask. Measured per layer: mu and mu_rel; per unit: eps (smallest allowed
attention weight over all layers and samples), radius and center count of the mask graph, the
bound's per-layer log rate, and the measured rate (slope of a least-squares line through
log mean mu against layer, over layers above the float64 floor). C = mu(X^0) in the curves.

Claims:
- bound-is-upper: for every mask (no norm), the measured rate is at least as steep as the
  bound's (measured - bound <= 0).
- local-masks-slower: the complete mask collapses faster than the causal window of width 1
  (measured rates), the ordering the bound's radius dependence suggests.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register

NAME = "wu2024-rates"
DATA_SEED_OFFSET = 10_000
UNIT_ROWS = ("eps", "radius", "n_centers", "bound_rate", "measured_rate")  # one value per unit


class Config(BaseModel):
    """Masked pure SANs: measured rate of mu's decay per mask, beside Wu et al.'s bound."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    masks: list[str] = Field(
        default_factory=lambda: ["complete", "causal", "window:1", "causal_window:1"],
        min_length=1,
    )
    """Mask specs (rankcollapse.masks), e.g. complete, causal, window:1, causal_window:1."""
    norms: list[Literal["none", "unit"]] = Field(default_factory=lambda: ["none", "unit"])
    """none (Thm 1) and/or unit (Wu's LayerNorm, post; Cor 1)."""
    depth: int = Field(32, ge=2, le=512)
    """Layers."""
    d_model: int = Field(16, ge=2, le=2048)
    """Width."""
    n_tokens: int = Field(8, ge=2, le=512)
    """Tokens per sequence."""
    n_samples: int = Field(8, ge=1, le=1024)
    """Sequences per unit."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1)
    """Seeds of weights and inputs."""


PRESETS = {
    "quick": {},
    "paper": {"depth": 128, "d_model": 64, "n_tokens": 32, "n_samples": 32, "seeds": [0, 1, 2]},
}


def units(config: Config) -> list[Unit]:
    return [
        {"mask": m, "norm": n, "seed": s}
        for m in config.masks
        for n in config.norms
        for s in config.seeds
    ]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    import torch

    from rankcollapse.masks import mask_from_spec
    from rankcollapse.metrics import dtype_floor, measure_states, metrics_frame
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens
    from rankcollapse.theory import (
        fitted_rate,
        mask_graph,
        min_allowed_weight,
        rate_no_norm,
        rate_unit_norm,
    )

    norm = {"norm": "post", "norm_kind": "unit"} if unit["norm"] == "unit" else {}
    net = ToyNet(
        NetConfig(
            n_layers=config.depth,
            d_model=config.d_model,
            mask=unit["mask"],
            value_init="orthogonal",
            seed=unit["seed"],
            **norm,
        )
    )
    x = random_tokens(
        config.n_samples, config.n_tokens, config.d_model, seed=DATA_SEED_OFFSET + unit["seed"]
    )
    with torch.no_grad():
        trace = net(x, return_attention=True)
    frames = [
        metrics_frame(
            measure_states(s, metrics=["mu", "mu_rel"], source_dtype=net.dtype), layer=layer
        )
        for layer, s in enumerate(trace.states)
    ]
    frame = pd.concat(frames, ignore_index=True)
    m = mask_from_spec(unit["mask"], config.n_tokens)
    graph = mask_graph(m)
    eps = min_allowed_weight(trace.attention, m)
    if unit["norm"] == "unit":
        bound_rate = rate_unit_norm(eps, graph.radius, graph.n_centers)
    else:
        bound_rate = rate_no_norm(eps, graph.radius)
    mu = frame[frame["metric"] == "mu"]
    above = mu[~mu["at_floor"]].groupby("layer")["value"].mean()
    # Where mu reached the floor, the sequence stops informing the rate.
    floor_value = dtype_floor(net.dtype) * float(mu[mu["layer"] == 0]["value"].mean())
    measured = fitted_rate(
        above.reindex(range(config.depth + 1)).fillna(0.0).to_numpy(), floor=floor_value
    )
    scalars = pd.DataFrame(
        {
            "layer": math.nan,
            "sample": -1,
            "metric": list(UNIT_ROWS),
            "value": [eps, graph.radius, graph.n_centers, bound_rate, measured],
            "at_floor": False,
        }
    )
    frame = pd.concat([frame, scalars], ignore_index=True)
    for position, (key, value) in enumerate(unit.items()):
        frame.insert(position, key, value)
    return frame


def rate_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per mask and norm: graph facts, eps and both rates (means over seeds)."""
    scalars = results[results["metric"].isin(UNIT_ROWS)]
    table = scalars.pivot_table(
        index=["mask", "norm"], columns="metric", values="value", aggfunc="mean", sort=False
    ).reset_index()
    table["measured - bound"] = table["measured_rate"] - table["bound_rate"]
    return table


def _figure(config: Config, results: pd.DataFrame, table: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(4.0 * len(config.norms), 3.6), layout="constrained")
    axes = fig.subplots(1, len(config.norms), squeeze=False)[0]
    for ax, norm in zip(axes, config.norms):
        for i, mask in enumerate(config.masks):
            color = f"C{i}"
            mu = results[
                (results["metric"] == "mu") & (results["norm"] == norm) & (results["mask"] == mask)
            ]
            mean = mu.groupby("layer")["value"].mean()
            ax.plot(mean.index, mean.clip(lower=1e-300), "-", color=color, label=f"{mask}")
            row = table[(table["mask"] == mask) & (table["norm"] == norm)].iloc[0]
            t = np.arange(config.depth + 1)
            ax.plot(t, mean.iloc[0] * np.exp(row["bound_rate"] * t), "--", color=color, lw=0.8)
        ax.set_yscale("log")
        ax.set_ylim(1e-17, None)
        ax.set_xlabel("layer")
        ax.set_title(f"norm = {norm} (dashed: bound, C = mu(X^0))", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mu(X^l) (mean over samples)")
    axes[0].legend(fontsize=7)
    return fig


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    table = rate_table(results)
    claims = []
    plain = table[table["norm"] == "none"]
    if len(plain):
        worst = plain.loc[plain["measured - bound"].idxmax()]
        claims.append(
            Claim.check(
                "bound-is-upper",
                "Every mask collapses at least as fast as Thm 1's bound (an upper bound).",
                "max over masks of measured rate - bound rate (no norm)",
                float(plain["measured - bound"].max()),
                "<=",
                0.0,
                note=f"closest: {worst['mask']} (measured {worst['measured_rate']:.3g}, bound "
                f"{worst['bound_rate']:.3g} per layer)",
            )
        )
        rates = plain.set_index("mask")["measured_rate"]
        if {"complete", "causal_window:1"} <= set(rates.index):
            claims.append(
                Claim.check(
                    "local-masks-slower",
                    "The complete mask collapses faster than the most local mask.",
                    "measured rate(complete) - measured rate(causal_window:1)",
                    float(rates["complete"] - rates["causal_window:1"]),
                    "<",
                    0.0,
                    note="; ".join(f"{k}: {v:.3g}" for k, v in rates.items()),
                )
            )
    return Summary(
        tables={"rates per mask": table},
        figures={"mu vs layer with bounds": _figure(config, results, table)},
        claims=claims,
        notes=[
            (
                "Rates are natural-log slopes per layer (negative = collapse). The bound's rate is "
                "log(1 - eps^r)/r (no norm) or log(1 - n eps^{2r})/(2r) (unit norm, Cor 1, which "
                "assumes strongly connected masks or non-negative initial cosines)."
            ),
            (
                "eps is measured on the mask's allowed edges over all layers and samples of a unit; "
                "C = mu(X^0) in the drawn bound curves (the theorem gives no closed form)."
            ),
            "Measured rates use the layers where mean mu is above 10 x float64 eps x mu(X^0).",
        ],
    )


register(
    Experiment(
        name=NAME,
        description="Masked SANs: measured collapse rate per mask vs Wu et al.'s Thm 1 / Cor 1.",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
