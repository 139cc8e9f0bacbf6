"""wu2024-equilibria: LayerNorm equilibria of every rank and their stability (Wu 2024, Thm 3).

Paper: Wu, Ajorlou, Wang, Jegelka, Jadbabaie, "On the role of attention masks and LayerNorm
in transformers", NeurIPS 2024 (arXiv 2405.18781), Thm 3; docs/wu2024.md. The dynamics are
X -> LN(A X W_V) with causal uniform attention (W_Q = W_K = 0), W_V = I + w J and LN = each
token divided by its norm (`rankcollapse.theory.equilibria`).

One unit per N = d in `n_tokens` (w = `w_over_n` N): every equilibrium of rank k = 1..N with
all 2^k sign choices; measured fixed-point residual, numerical rank, the k-th and (k+1)-th
singular values and the stable rank (with the bound N / (N - (N-1)/w^2) for full rank). Then
stability: each equilibrium perturbed by Gaussian noise of each scale in `perturbations`
(tokens re-normalised), and `n_random` Gaussian inputs, run for `n_layers` layers; we record
which keep numerical rank >= 2. The map preserves rank exactly (A, W_V invertible, LN a
positive diagonal), so a loss of rank is numerical: sigma_2 / sigma_1 falls like the powers of
A (second eigenvalue 1/2) until it is below `rank_rtol`.

Checks (constructions that hold by the theorem): fixed points to 1e-12, numerical rank exactly
k, stable rank within the bound. Beyond the paper (the project's measurement, not a statement
of Wu et al.): thm3-small-basins, for every N >= 3 most Gaussian inputs still collapse to
numerical rank 1 (the equilibria exist, but generic inputs do not reach them).
The 2-D counterexample is its own experiment, wu2024-counterexample.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments import verdicts
from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, Quote, check
from rankcollapse.metrics import min_sv, numerical_rank, stable_rank
from rankcollapse.plot import line_plot
from rankcollapse.seeds import Seed
from rankcollapse.sizes import NLayers, NTokens
from rankcollapse.theory.equilibria import (
    fixed_point_residual,
    long_frame,
    theorem3_equilibria,
    theorem3_stable_rank_bound,
    theorem3_value_matrix,
    trajectory,
    unit_norm,
)

NAME = "wu2024-equilibria"


class Config(BaseModel):
    """Sizes, perturbations and lengths of the Theorem 3 runs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    n_tokens: list[NTokens] = Field([3, 4, 6, 8], min_length=1)
    """N = d of each Theorem 3 run (each >= 2)."""
    w_over_n: float = Field(1.0, ge=1.0)
    """w / N (the theorem needs w >= N)."""
    n_layers: NLayers = 200
    """Layers run from perturbed equilibria and random inputs."""
    perturbations: list[Annotated[float, Field(gt=0.0)]] = Field([1e-8, 1e-4], min_length=1)
    """Std of the Gaussian noise added to each equilibrium before re-normalising."""
    n_perturbations: int = Field(1, ge=1)
    """Perturbed copies of each equilibrium per scale."""
    n_random: int = Field(256, ge=1)
    """Gaussian random inputs per size."""
    rank_rtol: float = Field(1e-10, gt=0.0, lt=1.0)
    """A singular value counts towards the numerical rank when > rank_rtol * sigma_max."""
    seed: Seed = 0
    """Seed of the perturbations and random inputs."""


PRESETS = {
    "quick": {},
    "paper": {
        "n_layers": 1000,
        "perturbations": [1e-10, 1e-8, 1e-6, 1e-4, 1e-2],
        "n_perturbations": 4,
        "n_random": 2048,
    },
}
SAYS = Quote(
    "a general class of sequences may not converge to a rank one subspace, and the "
    "self-attention dynamics with LayerNorm can simultaneously possess a rich set of equilibria "
    "with any possible rank between one and full",
    "abstract; Thm 3",
)
"""The paper shows the equilibria exist; it says nothing about random inputs: the small basins
are the project's measurement, a beyond finding."""


def units(config: Config) -> list[Unit]:
    return [{"n_tokens": n} for n in config.n_tokens]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    n = unit["n_tokens"]
    w = config.w_over_n * n
    w_v = theorem3_value_matrix(n, w)
    generator = torch.Generator().manual_seed(config.seed * 1000 + n)
    found = [(k, x) for k in range(1, n + 1) for x in theorem3_equilibria(n, n, w, k)]
    rank = torch.tensor([k for k, _ in found])
    x = torch.stack([x for _, x in found])  # (E, n, n)
    singular = torch.cat([torch.linalg.svdvals(x), torch.zeros(len(x), 1, dtype=x.dtype)], dim=1)
    rows = torch.arange(len(x))
    per_state = {
        "fixed_point_residual": fixed_point_residual(x, w_v),
        "numerical_rank": numerical_rank(x, rtol=config.rank_rtol),
        "sigma_k": singular[rows, rank - 1],  # smallest non-zero singular value
        "sigma_k+1": singular[rows, rank],  # zero in exact arithmetic
        "min_sv": min_sv(x),
        "stable_rank": stable_rank(x),
        "stable_rank_bound": torch.full((len(x),), theorem3_stable_rank_bound(n, w)).where(
            rank == n, torch.nan
        ),
    }
    frames = [long_frame(per_state, part="equilibrium", start="equilibrium", rank=rank)]
    for scale in config.perturbations:
        starts = x.repeat(config.n_perturbations, 1, 1)
        noise = torch.randn(starts.shape, generator=generator, dtype=torch.float64)
        final = trajectory(unit_norm(starts + scale * noise), w_v, config.n_layers)[-1]
        frames.append(
            long_frame(
                {
                    "numerical_rank": numerical_rank(final, rtol=config.rank_rtol),
                    "distance_to_start": (final - starts).flatten(1).norm(dim=1),
                },
                part="stability",
                start=f"perturbed {scale:g}",
                rank=rank.repeat(config.n_perturbations),
            )
        )
    random = unit_norm(torch.randn(config.n_random, n, n, generator=generator, dtype=torch.float64))
    final = trajectory(random, w_v, config.n_layers)[-1]
    frames.append(
        long_frame(
            {"numerical_rank": numerical_rank(final, rtol=config.rank_rtol)},
            part="stability",
            start="random",
            rank=numerical_rank(random, rtol=config.rank_rtol),
        )
    )
    return pd.concat(frames, ignore_index=True).assign(n_tokens=n, w=w)


def keeps_rank_2(stab: pd.DataFrame) -> pd.DataFrame:
    """Fraction of runs ending with numerical rank >= 2, per (n_tokens, start, rank)."""
    final = stab[stab["metric"] == "numerical_rank"].assign(kept=lambda d: d["value"] >= 2)
    return (
        final.groupby(["n_tokens", "start", "rank"])["kept"].mean().rename("fraction").reset_index()
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    results = results.astype({"n_tokens": int, "rank": int})  # a CSV round trip gives floats
    wide = (
        results[results["part"] == "equilibrium"]
        .pivot_table(index=["n_tokens", "rank", "sample"], columns="metric", values="value")
        .reset_index()
    )
    found = []
    if not wide.empty:
        full = wide[wide["rank"] == wide["n_tokens"]]
        found += [
            check(
                "thm3-fixed-points",
                "Every Theorem 3 equilibrium is a fixed point of "
                "X -> LN(A X W_V) to machine precision.",
                "max |LN(A X W_V) - X|",
                wide["fixed_point_residual"].max(),
                "<",
                1e-12,
            ),
            check(
                "thm3-ranks",
                "Each rank-k equilibrium has numerical rank exactly k.",
                "fraction of equilibria whose numerical rank equals k",
                (wide["numerical_rank"] == wide["rank"]).mean(),
                ">=",
                1.0,
            ),
            check(
                "thm3-stable-rank",
                "Full-rank equilibria are anisotropic: stable rank <= N / (N - (N-1)/w^2).",
                "max over full-rank equilibria of stable rank - bound",
                (full["stable_rank"] - full["stable_rank_bound"]).max(),
                "<=",
                0.0,
            ),
        ]
    stab = results[(results["part"] == "stability") & (results["start"] == "random")]
    final = stab[stab["metric"] == "numerical_rank"]
    kept = {  # one unit per random input: 1 if it kept numerical rank >= 2
        f"N={n}": (part["value"] >= 2).astype(float).tolist()
        for n, part in final.groupby("n_tokens")
        if n >= 3  # d = 2 has a wide basin: wu2024-counterexample
    }
    found.append(
        verdicts.for_every(
            "thm3-small-basins",
            says=SAYS,
            text="The equilibria's basins are small for d >= 3: most random inputs still collapse "
            "to numerical rank 1 (the theorem shows equilibria exist, not that inputs reach "
            "them).",
            quantity=f"share of random inputs keeping numerical rank >= 2 after {config.n_layers} "
            "layers (units: the random inputs, per N)",
            members=kept,
            side="<",
            margin=0.5,  # "most" inputs collapse: fewer than half keep rank 2
            expected=[f"N={n}" for n in config.n_tokens if n >= 3],
            decides="the paper preset (2048 random inputs per N; CPU, about 3 minutes)",
            note=", ".join(f"{k}: {np.mean(v):.3f}" for k, v in kept.items()),
            beyond=True,
        )
    )
    return found


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    results = results.astype({"n_tokens": int, "rank": int})
    wide = (
        results[results["part"] == "equilibrium"]
        .pivot_table(index=["n_tokens", "w", "rank", "sample"], columns="metric", values="value")
        .reset_index()
    )
    table = (
        wide.groupby(["n_tokens", "w", "rank"])
        .agg(
            equilibria=("sample", "count"),
            max_residual=("fixed_point_residual", "max"),
            rank_min=("numerical_rank", "min"),
            rank_max=("numerical_rank", "max"),
            sigma_k_min=("sigma_k", "min"),
            sigma_k1_max=("sigma_k+1", "max"),
            stable_rank_max=("stable_rank", "max"),
            stable_rank_bound=("stable_rank_bound", "max"),
        )
        .reset_index()
    )
    kept = keeps_rank_2(results[results["part"] == "stability"])
    figure = line_plot(
        kept[kept["start"] != "random"].rename(columns={"rank": "equilibrium rank k"}),
        x="equilibrium rank k",
        y="fraction",
        hue="start",
        panel="n_tokens",
        title=f"Perturbed Theorem 3 equilibria: fraction keeping numerical rank >= 2 after "
        f"{config.n_layers} layers",
        ylabel="fraction keeping rank >= 2",
    )
    return Summary(
        tables={
            "Theorem 3 equilibria": table,
            "fraction keeping numerical rank >= 2": kept.pivot_table(
                index=["n_tokens", "rank"], columns="start", values="fraction"
            ).reset_index(),
        },
        figures={"theorem3_stability": figure},
        claims=claims(config, results),
    )


register(
    Experiment(
        name=NAME,
        description="Wu 2024 Thm 3: LN equilibria of every rank and their stability",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
