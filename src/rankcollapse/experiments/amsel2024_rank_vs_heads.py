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

Findings, for every d, each decided by the one rule (`rankcollapse.experiments.verdicts`) over
the seeds whose full-rank head learned (error below LEARNED): a single head can settle in the
self-attending basin W_Q^T W_K ~ +I that another seed avoids, an optimisation failure the paper
discards by its minimum over seeds; such seeds are named in the note, and fewer than two
learned seeds leave the width NOT TESTED by rule:
- full-rank-wins: per seed, log10(full-rank error / best H r = d split) < -1 (far below).
- more-heads-do-not-close-gap: per seed, log10(full-rank error / best low-rank error, H r up
  to the largest budget x d) < 0.
- full-rank-aligns: per seed, the cosine of W_Q^T W_K with -I (farthest point) or +I (nearest
  neighbour) > 0.9.
The figure draws the best seed of each configuration (lines) and every seed (points).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import NOT_LEARNED, Assumption, Claim, Quote, for_every
from rankcollapse.plot import line_plot
from rankcollapse.seeds import Seed
from rankcollapse.sizes import DModel
from rankcollapse.train import TrainingConfig, training_rows

NAME = "amsel2024-rank-vs-heads"
LEARNED = 0.5  # a full-rank head has learned when its error is half the zero predictor's
DECIDES = "the quick preset with seeds 0-3 (--set seeds=[0,1,2,3]; about 30 minutes on 2 cores)"
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


def _learned_seeds(final: pd.DataFrame, d: int) -> tuple[list, list]:
    """(seeds whose full-rank head learned, those that did not): error below LEARNED. A seed
    whose single head settled in the self-attending basin W_Q^T W_K ~ +I is an optimisation
    failure the paper discards by taking the minimum over seeds (Sec. 7); it is named."""
    full = final[(final.d_model == d) & (final.d_qk == d) & (final.n_heads == 1)]
    good = sorted(full[full.value < LEARNED].seed)
    return good, sorted(set(full.seed) - set(good))


def _ratios(group: pd.DataFrame, d: int, low: pd.DataFrame, seeds: list) -> list[float]:
    """Per seed in `seeds`: log10 of the full-rank error over the least error of `low` (the
    same seed); NaN where a seed lacks either."""
    full = group[(group.d_qk == d) & (group.n_heads == 1)].set_index("seed").value
    best = low.groupby("seed").value.min()
    return [float(np.log10(full.get(s, np.nan) / best.get(s, np.nan))) for s in seeds]


def _per_width(
    final: pd.DataFrame, results: pd.DataFrame
) -> tuple[
    dict[str, list[float]],
    dict[str, list[float]],
    dict[str, list[float]],
    dict[str, list[Assumption]],
    list[str],
]:
    """Per width "d=D", over the seeds whose full-rank head learned: log10 ratios against the
    H r = d splits and against every low-rank layer, the full-rank head's alignment cosines,
    the learned-seeds assumption; and the seeds dropped, named."""
    split: dict[str, list[float]] = {}
    more: dict[str, list[float]] = {}
    cosines: dict[str, list[float]] = {}
    assumptions: dict[str, list[Assumption]] = {}
    dropped: list[str] = []
    align = results[(results.metric == "qk_alignment") & (results.d_qk == results.d_model)]
    align = align[align.n_heads == 1].set_index(["d_model", "seed"]).value
    for d, group in final.groupby("d_model"):
        seeds, stuck = _learned_seeds(final, d)
        dropped += [f"d={d}: seed {s} did not learn" for s in stuck]
        assumptions[f"d={d}"] = [
            Assumption(
                f"{NOT_LEARNED}: two or more seeds' full-rank heads below {LEARNED} (the zero "
                "predictor scores 1)",
                len(seeds) >= 2,
                f"{len(seeds)} of {len(seeds) + len(stuck)} seeds learned",
            )
        ]
        low = group[group.d_qk < d]
        split[f"d={d}"] = _ratios(group, d, low[low.d_qk * low.n_heads == d], seeds)
        more[f"d={d}"] = _ratios(group, d, low, seeds)
        cosines[f"d={d}"] = [float(align.get((d, s), np.nan)) for s in seeds]
    return split, more, cosines, assumptions, dropped


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    final = results[results.metric == "eval_rel_mse"]
    expected = [f"d={d}" for d in config.d_models]
    split, more, cosines, assumptions, dropped = _per_width(final, results)
    sign = "-I" if config.target == "farthest" else "+I"
    setting = f"N={config.n_points}, {config.steps} steps at most"
    note = "; ".join([setting, *dropped])
    units = " (units: the seeds whose full-rank head learned; members: widths)"
    out = [
        for_every(
            "full-rank-wins",
            says=Quote(
                "a simple and natural target function that can be represented using a single "
                "full-rank attention head for any context length, but that cannot be approximated "
                "by low-rank attention unless the number of heads is exponential in the embedding "
                "dimension",
                "abstract (Sec. 7 trains it)",
            ),
            text="one trained full-rank head reaches a much lower error than every H r = d split",
            quantity="per seed: log10(full-rank error / best H r = d error)" + units,
            members=split,
            side="<",
            margin=-1.0,  # "far below": an order of magnitude
            expected=expected,
            assumptions=assumptions,
            decides=DECIDES,
            note=note,
        )
    ]
    if max(config.head_budgets) > 1:
        out.append(
            for_every(
                "more-heads-do-not-close-gap",
                says=Quote(
                    "cannot be approximated by low-rank attention unless the number of heads is "
                    "exponential in the embedding dimension",
                    "abstract (Sec. 7 trains it)",
                ),
                text=f"low-rank layers with up to {max(config.head_budgets)}x more heads stay "
                "above the full-rank head",
                quantity="per seed: log10(full-rank error / best low-rank error)" + units,
                members=more,
                side="<",
                margin=0.0,  # above the full-rank head, by any amount
                expected=expected,
                assumptions=assumptions,
                decides=DECIDES,
                note=note,
            )
        )
    out.append(
        for_every(
            "full-rank-aligns",
            says=Quote(
                f"a trained full-rank head's W_K^T W_Q lines up with {sign}, with a large norm",
                "Sec. 7",
            ),
            text=f"the trained full-rank head's W_Q^T W_K lines up with {sign}",
            quantity=f"per seed: cosine of W_Q^T W_K with {sign}" + units,
            members=cosines,
            side=">",
            margin=0.9,  # "lines up": within about 25 degrees
            expected=expected,
            assumptions=assumptions,
            decides=DECIDES,
            note=note,
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
