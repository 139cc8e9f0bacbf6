"""amsel2024-constructions: hand-built attention layers for nearest-neighbour search.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Fact 1 (one full-rank head is arbitrarily accurate as the temperature grows, exact with
hardmax) and Thm 2 (rank-r heads need a number of heads growing like (d/r)^{1/eps}).
Nothing is trained: every layer is a construction of `rankcollapse.theory.amsel`, scored by
relative MSE (the zero predictor scores 1 on the same samples) on fresh seeded samples.

Parts (one unit per part, width and seed):
- full-rank: W_K^T W_Q = t I, M = I, nearest neighbour among N uniform points (N = 16 by
  default), relative MSE against the temperature t, and the hardmax head.
- low-rank: H hardmax heads on random r-dimensional query-key subspaces, output maps M_h
  fitted by least squares on fit samples and scored on fresh ones; N = 2 orthonormal points
  (the Thm 2 setting), error against H for each (d, r). The full-rank head at the largest
  temperature is scored on the same samples, for the comparison at equal budget.

Beyond the paper (the project's own tests, decided by the one rule over the seeds:
`rankcollapse.experiments.verdicts`). Thm 2 bounds every rank-r layer; random subspaces with
fitted outputs are one family of such layers, not the trained or best ones, so these test the
project's construction, not the theorem:
- full-rank-beats-low-rank: for every d of the low-rank part, per seed, the full-rank head's
  error (2 d^2 query-key parameters) over the best random mixture with as many (H r >= d) < 1.
- low-rank-worsens-with-d: per seed, rank-1 heads' error at the largest H at the largest d
  minus at the smallest, > 0.
Not reproduced: the abstract's "unless the number of heads is exponential in the embedding
dimension, even for short context lengths" is proved for the biased nearest-neighbour target of
Sec. 5, which the project does not build; random rank-1 heads can only agree with it.
Checks (constructions, so they hold by design; they guard the code, not the paper):
- depth-vote-beats-one-layer: the same H random rank-1 hardmax heads vote (each picks a point)
  and an argmax over the pick counts returns the point most heads picked; it beats the best
  one-layer mixture of random rank-1 heads (fitted output maps) at any H: error ratio < 1 for
  every d. The second step is computed directly, not by an attention layer, so this checks
  the voting idea behind Thm 5 (Sec. 6, N = 2), not the theorem: with too few heads for d
  (e.g. d = 8, H = 4) the vote loses; the trained test of depth is amsel2024-depth.
- full-rank-falls (Fact 1's construction): for every d, the full-rank error falls
  monotonically in t, below 1e-3 at the largest t.
- hardmax-exact: the hardmax full-rank head is exact (error 0).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pandas as pd
import torch
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Experiment, Summary, Unit, register
from rankcollapse.experiments.verdicts import Claim, Quote, check, finding, for_every
from rankcollapse.plot import construction_figures
from rankcollapse.seeds import Seed
from rankcollapse.sizes import DModel, NHeads
from rankcollapse.tasks import NeighbourTask, layer_error
from rankcollapse.theory.amsel import (
    fit_output_maps,
    full_rank_head,
    random_low_rank_heads,
    rank_one_vote,
)

NAME = "amsel2024-constructions"
FIT_SEED_OFFSET, EVAL_SEED_OFFSET = 1_000, 2_000  # fit and score samples: separate streams
DECIDES = "more seeds (the quick preset with --set seeds=[0,1,2,3,4]; about 5 minutes on 2 cores)"


class Config(BaseModel):
    """Constructions scored on fresh nearest-neighbour samples."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    full_rank_d_models: list[DModel] = Field(default_factory=lambda: [8, 16], min_length=1)
    """Widths d of the full-rank part."""
    n_points: int = Field(16, ge=1, le=4096)
    """Points per set N in the full-rank part."""
    temperatures: list[float] = Field(
        default_factory=lambda: [1, 3, 10, 30, 100, 300, 1e3, 3e3, 1e4], min_length=2
    )
    """Temperatures t of the full-rank head (increasing)."""
    low_rank_d_models: list[DModel] = Field(default_factory=lambda: [4, 8], min_length=1)
    """Widths d of the low-rank part (N = 2 orthonormal points)."""
    ranks: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    """Query-key ranks r of the random heads (those >= d are skipped)."""
    n_heads: list[NHeads] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], min_length=1)
    """Numbers of random heads H."""
    fit_samples: int = Field(20_000, ge=100, le=10_000_000)
    """Samples for the least-squares fit of the output maps."""
    eval_samples: int = Field(20_000, ge=100, le=10_000_000)
    """Fresh samples every error is measured on."""
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    """Seeds of the samples and the random subspaces."""


PRESETS = {
    "quick": {"fit_samples": 10_000, "eval_samples": 10_000, "seeds": [0, 1]},
    "paper": {
        "full_rank_d_models": [8, 16, 32, 64],
        "temperatures": [1, 3, 10, 30, 100, 300, 1e3, 3e3, 1e4, 3e4, 1e5],
        "low_rank_d_models": [4, 8, 16, 32],
        "ranks": [1, 2, 4],
        "n_heads": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
        "fit_samples": 200_000,
        "eval_samples": 100_000,
        "seeds": [0, 1, 2, 3, 4],
    },
}


def units(config: Config) -> list[Unit]:
    full = [
        {"part": "full-rank", "d_model": d, "seed": s}
        for d in config.full_rank_d_models
        for s in config.seeds
    ]
    ds = config.low_rank_d_models
    return full + [{"part": "low-rank", "d_model": d, "seed": s} for d in ds for s in config.seeds]


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    d, seed = unit["d_model"], unit["seed"]
    sample = lambda task, n, offset: task.sample(
        n, torch.Generator().manual_seed(offset + seed), torch.float64
    )
    error = lambda construction, batch: layer_error(construction.layer, batch)
    rows = []
    row = lambda **kw: rows.append({**unit, "d_qk": d, "n_heads": 1, "temperature": np.nan, **kw})
    if unit["part"] == "full-rank":
        batch = sample(NeighbourTask(d, config.n_points), config.eval_samples, EVAL_SEED_OFFSET)
        for t in config.temperatures:
            row(temperature=t, metric="rel_mse", value=error(full_rank_head(d, t), batch))
        row(metric="rel_mse_hardmax", value=error(full_rank_head(d, 1.0, hard=True), batch))
        return pd.DataFrame(rows)
    task = NeighbourTask(d, 2, points="orthogonal")
    fit = sample(task, config.fit_samples, FIT_SEED_OFFSET)
    held_out = sample(task, config.eval_samples, EVAL_SEED_OFFSET)
    t_max = max(config.temperatures)
    row(temperature=t_max, metric="rel_mse", value=error(full_rank_head(d, t_max), held_out))
    for r in (r for r in config.ranks if r < d):
        for h in config.n_heads:
            heads = random_low_rank_heads(d, r, h, seed=seed)
            fitted = fit_output_maps(heads, fit.x, fit.queries, fit.target)
            row(d_qk=r, n_heads=h, metric="rel_mse", value=layer_error(fitted.layer, held_out))
            if r == 1:  # the same heads in two layers: they vote, the next takes the majority
                vote = layer_error(partial(rank_one_vote, heads), held_out)
                row(d_qk=1, n_heads=h, metric="rel_mse_vote", value=vote)
    return pd.DataFrame(rows)


def _low_rank_errors(results: pd.DataFrame) -> pd.DataFrame:
    """Low-rank part: one row per (d, r, H, seed), with H r (full rank: d)."""
    low = results[(results.part == "low-rank") & (results.metric == "rel_mse")]
    return low.assign(total_rank=low.d_qk * low.n_heads)


def _depth_check(config: Config, results: pd.DataFrame, errors: pd.DataFrame) -> Claim:
    """The vote construction: H rank-1 heads pick points, then an argmax over the pick counts
    (computed directly, not by an attention layer), against the best one-layer mixture of the
    same heads at any H. A check of the construction, not a test of Thm 5."""
    votes = results[(results.part == "low-rank") & (results.metric == "rel_mse_vote")]
    vote = votes[votes.n_heads == max(config.n_heads)].groupby("d_model").value.mean()
    one_layer = errors[errors.d_qk == 1].groupby(["d_model", "n_heads"]).value.mean()
    best = one_layer.groupby(level="d_model").min()
    widths = [d for d in config.low_rank_d_models if d > 1]
    ratios = {d: float(vote.get(d, np.nan) / best.get(d, np.nan)) for d in widths}
    worst = max(ratios.values(), default=np.nan)  # NaN if any width has no value
    worst = np.nan if any(np.isnan(v) for v in ratios.values()) else worst
    curve = votes.groupby(["d_model", "n_heads"]).value.mean()
    return check(
        "depth-vote-beats-one-layer",
        f"the majority vote of {max(config.n_heads)} random rank-1 hardmax heads (each picks a "
        "point; an argmax over the pick counts, not an attention layer, returns the most "
        "picked) beats the best one-layer mixture of such heads at any H: the construction "
        "behind Thm 5's depth idea (Sec. 6), N = 2",
        f"vote error at H={max(config.n_heads)} / least one-layer rank-1 error over H, worst d",
        float(worst),
        "<",
        1.0,
        note="ratio by d: "
        + ", ".join(f"d={d}: {v:.3g}" for d, v in ratios.items())
        + "; vote error by (d, H): "
        + ", ".join(f"({d}, {h}): {v:.3g}" for (d, h), v in curve.items()),
    )


def claims(config: Config, results: pd.DataFrame) -> list[Claim]:
    out = _full_rank_checks(config, results)
    errors = _low_rank_errors(results)
    if errors.empty:
        return out
    out.append(_separation(config, errors))
    out.append(_depth_check(config, results, errors))
    if len(config.low_rank_d_models) >= 2:
        out.append(_width_trend(config, errors))
    return out


def _full_rank_checks(config: Config, results: pd.DataFrame) -> list[Claim]:
    """Fact 1's construction: one full-rank head's error falls with the temperature (softmax)
    and is exact (hardmax)."""
    full = results[(results.part == "full-rank") & (results.metric == "rel_mse")]
    t_max = max(config.temperatures)
    curves = full.groupby(["d_model", "temperature"]).value.mean().unstack("d_model")
    rises = [f"d={d}" for d in curves if (curves[d].diff().iloc[1:] > 0).any()]
    finals = {f"d={d}": np.inf if f"d={d}" in rises else curves[d].iloc[-1] for d in curves}
    last = full[full.temperature == t_max]
    worst = max((finals.get(f"d={d}", np.nan) for d in config.full_rank_d_models), default=np.nan)
    return [
        check(
            "full-rank-falls",
            f"one full-rank head's error falls monotonically with the temperature, below 1e-3 "
            f"at t={t_max:g} (N={config.n_points}): Fact 1's construction",
            f"mean error at t={t_max:g} (inf if the curve rises), worst d",
            float(worst),
            "<",
            1e-3,
            note=f"rises: {', '.join(rises) or 'none'}; largest error at t={t_max:g} over (d, "
            f"seed): {last.value.max():.3g}",
        ),
        check(
            "hardmax-exact",
            "the hardmax full-rank head is exact",
            "largest relative MSE of the hardmax full-rank head",
            float(results[results.metric == "rel_mse_hardmax"].value.max()),
            "<",
            1e-12,
        ),
    ]


def _separation(config: Config, errors: pd.DataFrame) -> Claim:
    """Thm 2 on random subspaces: full rank at t_max against the mixtures with at least the
    full head's query-key rank (H r >= d), per width, seed by seed (the units)."""
    t_max = max(config.temperatures)
    per_seed = {}
    for d, group in errors.groupby("d_model"):
        full_d = group[group.d_qk == d].set_index("seed").value
        rich = group[(group.d_qk < d) & (group.total_rank >= d)].groupby("seed").value.min()
        per_seed[f"d={d}"] = [
            float(full_d.get(s, np.nan) / rich.get(s, np.nan)) for s in config.seeds
        ]  # a ratio, not its log: the full-rank head at t_max can score exactly 0
    return for_every(
        "full-rank-beats-low-rank",
        says=Quote(
            "a simple and natural target function that can be represented using a single "
            "full-rank attention head for any context length, but that cannot be approximated "
            "by low-rank attention unless the number of heads is exponential in the embedding "
            "dimension",
            "abstract; Sec. 4, Thm 2",
        ),
        text="at equal (or larger) query-key parameter budget, one full-rank head beats every "
        "random low-rank mixture tried (random subspaces with fitted outputs: one family of "
        "low-rank layers, not the best, so this tests the project's construction)",
        quantity="per seed: full-rank error / best low-rank error with H r >= d "
        "(units: seeds; members: widths)",
        members=per_seed,
        side="<",
        margin=1.0,  # the full-rank head is better, by any amount
        expected=[f"d={d}" for d in config.low_rank_d_models],
        decides=DECIDES,
        note=f"full rank at t={t_max:g}, N=2 orthonormal points",
        beyond=True,
    )


def _width_trend(config: Config, errors: pd.DataFrame) -> Claim:
    """The project's reading of Thm 2: rank-1 heads' error (at the most heads) grows with d,
    seed by seed (the same seed draws both widths' samples from its own stream)."""
    rank1 = errors[(errors.d_qk == 1) & (errors.n_heads == max(config.n_heads))]
    by = rank1.set_index(["d_model", "seed"]).value
    small, large = min(config.low_rank_d_models), max(config.low_rank_d_models)
    means = rank1.groupby("d_model").value.mean()
    return finding(
        "low-rank-worsens-with-d",
        says=Quote(
            "cannot be approximated by low-rank attention unless the number of heads is "
            "exponential in the embedding dimension, even for short context lengths",
            "abstract (proved for the biased nearest neighbour of Sec. 5; Thm 2 for N = 2)",
        ),
        text=f"rank-1 heads' error at H={max(config.n_heads)} grows with the width d (N = 2, "
        "random subspaces: a consequence the project reads off Thm 2, not the abstract's "
        "exponential count, which needs the best low-rank layer)",
        quantity=f"per seed: error at d={large} minus at d={small} (units: seeds)",
        values=[
            float(by.get((large, s), np.nan) - by.get((small, s), np.nan)) for s in config.seeds
        ],
        side=">",
        margin=0.0,  # grows, by any amount
        decides=DECIDES,
        note="mean errors by d: " + ", ".join(f"d={d}: {v:.3g}" for d, v in means.items()),
        beyond=True,
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    full = results[(results.part == "full-rank") & (results.metric == "rel_mse")].copy()
    full["d"] = "d=" + full.d_model.astype(str)
    errors = _low_rank_errors(results)
    mixtures = errors[errors.d_qk < errors.d_model].copy()
    mixtures["heads"] = "d=" + mixtures.d_model.astype(str) + ", r=" + mixtures.d_qk.astype(str)
    figures = construction_figures(full, mixtures, n_points=config.n_points)
    stats = ["mean", "std", "min", "max"]
    tables = {
        "full_rank": full.groupby(["d_model", "temperature"]).value.agg(stats).reset_index(),
        "low_rank": errors.groupby(["d_model", "d_qk", "n_heads"]).value.agg(stats).reset_index(),
    }
    return Summary(tables=tables, figures=figures, claims=claims(config, results))


register(
    Experiment(
        name=NAME,
        description="Full-rank head vs random low-rank heads, constructed (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
        claims=claims,
    )
)
