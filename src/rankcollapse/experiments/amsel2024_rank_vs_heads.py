"""amsel2024-rank-vs-heads: trained attention, one full-rank head vs many low-rank heads.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Sec. 7 learning experiments (one layer succeeds iff it is full rank) on the decoupled
layer of Sec. 3. At CPU scale (d = 16, N = 8, one layer, a few
thousand steps) the single full-rank head ends an order of magnitude below every H r = d split,
and several times more low-rank heads do not close the gap.

Model: one `RankAttention` layer (H heads of query-key rank r, full value-output maps), trained
on fresh samples every step (AdamW lr 0.01, betas (0.9, 0.95), no weight decay, warm-up then
cosine decay), every (r, H, seed) of a width trained together as one batched model
(`rankcollapse.train.train_grid`), early stop on a plateau. Task: the farthest point (self-
attention, the authors' training target) or the nearest neighbour of a separate query. Ranks
r in {1, 2, d/4, d}; heads H = b d / r for each budget b (H r = b d query-key rank in total).

Findings (for every d; each configuration scored by its best seed, the paper's minimum over
seeds, since a single head can settle in the self-attending basin W_Q^T W_K ~ +I that another
seed avoids; the notes give every seed's value and how many seeds agree):
- full-rank-wins: the full-rank head's held-out error is far below the best H r = d split:
  ratio full-rank / best split, < 0.1 for every d.
- more-heads-do-not-close-gap: the full-rank head also beats every low-rank layer with more
  heads (H r up to the largest budget x d): ratio full-rank / best low-rank, < 1 for every d.
- full-rank-aligns: the trained full-rank head's W_Q^T W_K lines up with -I (farthest point)
  or +I (nearest neighbour): cosine of the best seed, > 0.9 for every d.
The figure draws the best seed of each configuration (lines) and every seed (points).
"""

from __future__ import annotations

from typing import Any, Literal

import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import (
    NOT_LEARNED,
    Claim,
    Experiment,
    Summary,
    Unit,
    for_every,
    register,
    seeds_agree,
)
from rankcollapse.plot import line_plot
from rankcollapse.seeds import Seed
from rankcollapse.sizes import DModel
from rankcollapse.train import TrainingConfig, training_rows

NAME = "amsel2024-rank-vs-heads"
LEARNED = 0.5  # a full-rank head has learned when its error is half the zero predictor's
Rank = int | Literal["d/4", "d/2", "d"]
DEFAULT_RANKS: tuple[Rank, ...] = (1, 2, "d/4", "d")


class Config(TrainingConfig):
    """A grid of one-layer attention models trained on nearest-neighbour targets."""

    d_models: list[DModel] = Field(default_factory=lambda: [8, 16], min_length=1)
    """Widths d (one batched unit each)."""
    n_points: int = Field(8, ge=2, le=1024)
    """Points per set N."""
    target: Literal["farthest", "nearest"] = "farthest"
    """Farthest point (self-attention) or nearest neighbour of a separate query."""
    ranks: list[Rank] = Field(default_factory=lambda: list(DEFAULT_RANKS), min_length=1)
    """Query-key ranks r per head: integers or fractions of d."""
    head_budgets: list[int] = Field(default_factory=lambda: [1, 4], min_length=1)
    """Multiples b of d: each rank gets H = b d / r heads (the full rank: H = b)."""
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1], min_length=1)
    """Seeds of initialisation and data (the claims take the best seed)."""
    steps: int = Field(2000, ge=1, le=1_000_000)
    """Optimiser steps at most (each configuration may stop earlier on a plateau)."""


PRESETS: dict[str, dict[str, Any]] = {
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
    result = train_grid(task, points, config.train_settings(), device=config.device)
    frame = training_rows(result)
    frame.insert(0, "d_model", d)
    frame["device"] = str(config.device)
    columns = ["d_model", "d_qk", "n_heads", "seed", "step", "metric", "value", "device"]
    return frame[columns]


def _ratios(group: pd.DataFrame, d: int, low: pd.DataFrame) -> tuple[float, dict[int, float]]:
    """Full-rank error / least error of `low`: best seeds, and seed by seed."""
    full = group[(group.d_qk == d) & (group.n_heads == 1)].set_index("seed").value
    if full.empty or low.empty:
        return float("nan"), {}
    per_seed = {s: full[s] / low[low.seed == s].value.min() for s in full.index}
    return float(full.min() / low.value.min()), per_seed


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    final = results[results.metric == "eval_rel_mse"]
    expected = [f"d={d}" for d in config.d_models]
    split, more, notes = {}, {}, {"split": [], "more": [], "align": []}
    for d, group in final.groupby("d_model"):
        low = group[group.d_qk < d]
        split[f"d={d}"], per_seed = _ratios(group, d, low[low.d_qk * low.n_heads == d])
        notes["split"].append(f"d={d}: {seeds_agree(per_seed, '<', 0.1)}")
        more[f"d={d}"], per_seed = _ratios(group, d, low)
        notes["more"].append(f"d={d}: {seeds_agree(per_seed, '<', 1.0)}")
    align = results[(results.metric == "qk_alignment") & (results.d_qk == results.d_model)]
    align = align[align.n_heads == 1].merge(
        final[["d_model", "d_qk", "n_heads", "seed", "value"]],
        on=["d_model", "d_qk", "n_heads", "seed"],
        suffixes=("", "_error"),
    )
    cosines = {}
    for d, group in align.groupby("d_model"):
        cosines[f"d={d}"] = float(group.loc[group.value_error.idxmin()].value)
        agree = seeds_agree(dict(zip(group.seed, group.value, strict=True)), ">", 0.9)
        notes["align"].append(f"d={d}: {agree}")
    sign = "-I" if config.target == "farthest" else "+I"
    setting = f"best seed per configuration; N={config.n_points}, {config.steps} steps at most"
    full = final[(final.d_qk == final.d_model) & (final.n_heads == 1)]
    best_full = full.groupby("d_model").value.min()
    unlearned = best_full[~(best_full < LEARNED)]
    untested = (
        f"{NOT_LEARNED}: the full-rank head's best error is not below {LEARNED} (the zero "
        "predictor scores 1): " + ", ".join(f"d={d}: {v:.3g}" for d, v in unlearned.items())
        if len(unlearned)
        else ""
    )
    out = [
        for_every(
            "full-rank-wins",
            "one trained full-rank head reaches a much lower error than every H r = d split",
            "full-rank error / best H r = d error (best seeds), worst d",
            split,
            "<",
            0.1,
            expected=expected,
            note=f"{setting}; per seed: " + "; ".join(notes["split"]),
            source="Sec. 7",
            paper="one layer succeeds if and only if it is full rank",
            untested=untested,
        )
    ]
    if max(config.head_budgets) > 1:
        out.append(
            for_every(
                "more-heads-do-not-close-gap",
                f"low-rank layers with up to {max(config.head_budgets)}x more heads stay above "
                "the full-rank head",
                "full-rank error / best low-rank error (best seeds), worst d",
                more,
                "<",
                1.0,
                expected=expected,
                note=f"{setting}; per seed: " + "; ".join(notes["more"]),
                source="Sec. 7",
                paper="every r < d stays far from 0, even with many times the parameters",
                untested=untested,
            )
        )
    out.append(
        for_every(
            "full-rank-aligns",
            f"the trained full-rank head's W_Q^T W_K lines up with {sign}",
            f"cosine of W_Q^T W_K with {sign} (best seed), worst d",
            cosines,
            ">",
            0.9,
            expected=expected,
            note="per seed: " + "; ".join(notes["align"]),
            source="Sec. 7",
            paper=f"a trained full-rank head's W_K^T W_Q lines up with {sign}, large norm",
            untested=untested,
        )
    )
    return out


def _seed_points(figure, final: pd.DataFrame, d_values: list[int]) -> None:
    """Every seed as a small hollow point beside the best-seed lines, in the line's colour."""
    panels = [ax for ax in figure.axes if ax.get_visible()]
    for ax, d in zip(panels, d_values, strict=False):
        colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
        for label, rows in final[final.d_model == d].groupby("rank"):
            ax.plot(
                rows.n_heads,
                rows.value,
                "o",
                ms=4,
                mfc="none",
                alpha=0.6,
                color=colours.get(label, "grey"),
            )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    final = results[results.metric == "eval_rel_mse"].copy()
    final["rank"] = "r=" + final.d_qk.astype(str)
    final["d"] = final.d_model
    best = final.loc[final.groupby(["d_model", "d_qk", "n_heads"]).value.idxmin()]
    figure = line_plot(
        best,
        x="n_heads",
        hue="rank",
        panel="d",
        logx=True,
        logy=True,
        title="Error vs heads (line: best seed; points: each seed)",
        ylabel="relative MSE (zero predictor: 1)",
    )
    _seed_points(figure, final, list(pd.unique(best.d_model)))
    for ax in figure.axes:
        ax.set_xlabel("heads H")
    keys = ["d_model", "d_qk", "n_heads"]
    table = final.groupby(keys).value.agg(["min", "median", "max", "count"]).reset_index()
    table = table.rename(columns={"min": "best seed"})
    steps = results[results.metric == "steps_run"].groupby(keys).value
    table = table.merge(steps.mean().rename("steps_run").reset_index(), how="left", on=keys)
    return Summary(
        tables={"errors": table}, figures={"error_vs_heads": figure}, claims=claims(config, results)
    )


register(
    Experiment(
        name=NAME,
        description="Trained attention: one full-rank head vs H r = d low-rank heads (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
