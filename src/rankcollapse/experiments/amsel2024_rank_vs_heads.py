"""amsel2024-rank-vs-heads: trained attention, one full-rank head vs many low-rank heads.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Sec. 7 learning experiments (one layer succeeds iff it is full rank) on the decoupled
layer of Sec. 3; spec amsel2024.md sec. 3, 4. At CPU scale (d = 16, N = 8, one layer, a few
thousand steps) the single full-rank head ends an order of magnitude below every H r = d split,
and several times more low-rank heads do not close the gap.

Model: one `RankAttention` layer (H heads of query-key rank r, full value-output maps), trained
on fresh samples every step (AdamW lr 0.01, betas (0.9, 0.95), no weight decay, warm-up then
cosine decay), every (r, H, seed) of a width trained together as one batched model
(`rankcollapse.train.train_grid`), early stop on a plateau. Task: the farthest point (self-
attention, the authors' training target) or the nearest neighbour of a separate query. Ranks
r in {1, 2, d/4, d}; heads H = b d / r for each budget b (H r = b d query-key rank in total).

Claims (computed from this run):
Each configuration is scored by its best seed (the paper: minimum over seeds); a single head
can settle in the self-attending basin W_Q^T W_K ~ +I, which another seed avoids.
- full-rank-wins: for every d, the full-rank head's held-out error is far below the best
  H r = d split: measured, the largest ratio full-rank / best split over d; < 0.1.
- more-heads-do-not-close-gap: the full-rank head also beats every low-rank layer with more
  heads (H r up to the largest budget x d): largest ratio over d; < 1.
- full-rank-aligns: the trained full-rank head's W_Q^T W_K lines up with -I (farthest point)
  or +I (nearest neighbour): smallest cosine over d and seeds; > 0.9.
"""

from __future__ import annotations

from typing import Literal

import pandas as pd
from pydantic import Field

from rankcollapse.experiments._amsel import TrainingConfig, training_rows
from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.plot import band_plot, line_plot

NAME = "amsel2024-rank-vs-heads"
Rank = int | Literal["d/4", "d/2", "d"]


class Config(TrainingConfig):
    """A grid of one-layer attention models trained on nearest-neighbour targets."""

    d_models: list[int] = Field(default_factory=lambda: [8, 16], min_length=1)
    """Widths d (one batched unit each)."""
    n_points: int = Field(8, ge=2, le=1024)
    """Points per set N."""
    target: Literal["farthest", "nearest"] = "farthest"
    """Farthest point (self-attention) or nearest neighbour of a separate query."""
    ranks: list[Rank] = Field(default_factory=lambda: [1, 2, "d/4", "d"], min_length=1)
    """Query-key ranks r per head: integers or fractions of d."""
    head_budgets: list[int] = Field(default_factory=lambda: [1, 4], min_length=1)
    """Multiples b of d: each rank gets H = b d / r heads (the full rank: H = b)."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1], min_length=1)
    """Seeds of initialisation and data (the claims take the best seed)."""
    steps: int = Field(2000, ge=1, le=1_000_000)
    """Optimiser steps at most (each configuration may stop earlier on a plateau)."""


PRESETS = {
    # A short run: lr 0.03 lets the full-rank head's query-key norm grow within 1500 steps.
    "quick": {"steps": 1500, "lr": 0.03},
    "paper": {
        "d_models": [8, 16, 32],
        "head_budgets": [1, 2, 4, 8],
        "seeds": [0, 1, 2, 3, 4],
        "steps": 20_000,
        "batch_size": 256,
        "lr": 0.01,
        "patience": 40,
        "eval_samples": 16384,
    },
}


def resolve_rank(rank: Rank, d_model: int) -> int:
    """An integer rank from 1, 2, "d/4", "d/2", "d".

    Example:
        >>> resolve_rank("d/4", 16), resolve_rank("d", 16), resolve_rank(2, 16)
        (4, 16, 2)
    """
    if isinstance(rank, int):
        return rank
    return d_model // {"d/4": 4, "d/2": 2, "d": 1}[rank]


def grid_points(config: Config, d_model: int) -> list[tuple[int, int]]:
    """The distinct (r, H) of a width: r from `ranks`, H = b d / r for every budget b."""
    ranks = sorted({min(max(resolve_rank(r, d_model), 1), d_model) for r in config.ranks})
    return [(r, b * d_model // r) for r in ranks for b in config.head_budgets if d_model % r == 0]


def units(config: Config) -> list[Unit]:
    return [{"d_model": d} for d in config.d_models]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    from rankcollapse.tasks import NeighbourTask
    from rankcollapse.train import GridPoint, train_grid

    d = unit["d_model"]
    task = NeighbourTask(d, config.n_points, target=config.target)
    points = [GridPoint(r, h, s) for r, h in grid_points(config, d) for s in config.seeds]
    frame = training_rows(train_grid(task, points, config.train_settings()))
    frame.insert(0, "d_model", d)
    columns = ["d_model", "d_qk", "n_heads", "seed", "step", "metric", "value"]
    return frame[columns]


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    final = results[results.metric == "eval_rel_mse"].copy()
    final["rank"] = "r=" + final.d_qk.astype(str)
    final["d"] = final.d_model
    figures = {
        "error_vs_heads": band_plot(
            final,
            x="n_heads",
            hue="rank",
            panel="d",
            logx=True,
            logy=True,
            floor_column=None,
            title="Trained attention: held-out relative MSE vs heads",
            ylabel="relative MSE",
        )
    }
    curves = results[results.metric == "train_rel_mse"].copy()
    curves["config"] = "r=" + curves.d_qk.astype(str) + ", H=" + curves.n_heads.astype(str)
    curves["d"] = curves.d_model
    if len(curves):
        figures["loss_curves"] = line_plot(
            curves,
            x="step",
            hue="config",
            panel="d",
            logy=True,
            title="Training loss (relative MSE, mean over seeds)",
            ylabel="relative MSE",
        )

    # The paper's convention: the best seed of each configuration (a single-head run can settle
    # in the self-attending basin W_Q^T W_K ~ +I; another seed finds -I).
    best = final.groupby(["d_model", "d_qk", "n_heads"]).value.min().reset_index()
    split_ratios, all_ratios = [], []
    for d, group in best.groupby("d_model"):
        full = group[(group.d_qk == d) & (group.n_heads == 1)].value
        low = group[group.d_qk < d]
        split = low[low.d_qk * low.n_heads == d].value
        if len(full) and len(split):
            split_ratios.append(float(full.iloc[0] / split.min()))
        if len(full) and len(low):
            all_ratios.append(float(full.iloc[0] / low.value.min()))
    claims = []
    if split_ratios:
        claims.append(
            Claim.check(
                "full-rank-wins",
                "one trained full-rank head reaches a much lower error than every H r = d split",
                "max over d of full-rank error / best H r = d error",
                max(split_ratios),
                "<",
                0.1,
                note=f"best seed per configuration; d in {sorted(best.d_model.unique().tolist())}, "
                f"N={config.n_points}, {config.steps} steps at most",
            )
        )
    if all_ratios and max(config.head_budgets) > 1:
        claims.append(
            Claim.check(
                "more-heads-do-not-close-gap",
                f"low-rank layers with up to {max(config.head_budgets)}x more heads stay above "
                "the full-rank head",
                "max over d of full-rank error / best low-rank error",
                max(all_ratios),
                "<",
                1.0,
            )
        )
    align = results[results.metric == "qk_alignment"]
    full_align = align[(align.d_qk == align.d_model) & (align.n_heads == 1)]
    if len(full_align):
        sign = "-I" if config.target == "farthest" else "+I"
        best_seed = full_align.merge(
            final[["d_model", "d_qk", "n_heads", "seed", "value"]],
            on=["d_model", "d_qk", "n_heads", "seed"],
            suffixes=("", "_error"),
        )
        best_seed = best_seed.loc[best_seed.groupby("d_model").value_error.idxmin()]
        claims.append(
            Claim.check(
                "full-rank-aligns",
                f"the trained full-rank head's W_Q^T W_K lines up with {sign}",
                f"smallest cosine with {sign} over d (best seed of each d)",
                float(best_seed.value.min()),
                ">",
                0.9,
                note="per seed: "
                + ", ".join(
                    f"d={d} seed={s}: {v:.3f}"
                    for d, s, v in full_align[["d_model", "seed", "value"]].itertuples(index=False)
                ),
            )
        )
    table = (
        final.groupby(["d_model", "d_qk", "n_heads"])
        .value.agg(["mean", "std", "count"])
        .reset_index()
    )
    steps = results[results.metric == "steps_run"].groupby(["d_model", "d_qk", "n_heads"]).value
    table["steps_run"] = steps.mean().values
    return Summary(tables={"errors": table}, figures=figures, claims=claims)


register(
    Experiment(
        name=NAME,
        description="Trained attention: one full-rank head vs H r = d low-rank heads (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
