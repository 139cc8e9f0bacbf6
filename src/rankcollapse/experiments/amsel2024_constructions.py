"""amsel2024-constructions: hand-built attention layers for nearest-neighbour search.

Paper: Amsel, Yehudai, Bruna, "On the benefits of rank in attention layers" (arXiv 2407.16153,
2024), Fact 1 (one full-rank head is arbitrarily accurate as the temperature grows) and Thm 2
(rank-r heads need a number of heads growing like (d/r)^{1/eps}); spec amsel2024.md sec. 3, 5.
Nothing is trained: every layer is a construction of `rankcollapse.theory.amsel`, scored by
relative MSE (the zero predictor scores 1 on the same samples) on fresh seeded samples.

Parts (one unit per part, width and seed):
- full-rank: W_K^T W_Q = t I, M = I, nearest neighbour among N uniform points (N = 16 by
  default), relative MSE against the temperature t; the N = 2 closed form alongside.
- low-rank: H hardmax heads on random r-dimensional query-key subspaces, output maps M_h
  fitted by least squares on fit samples and scored on fresh ones; N = 2 orthonormal points
  (the Thm 2 setting), error against H for each (d, r). The full-rank head at the largest
  temperature is scored on the same samples, for the comparison at equal budget.

Claims (computed from this run):
- full-rank-falls: the full-rank error falls monotonically in t and ends below 1e-3 (the
  largest t of the grid; spec: t = 1e4 suffices at d = 8, N = 16).
- full-rank-beats-low-rank: on the N = 2 task, the full-rank head (2 d^2 query-key parameters)
  beats every low-rank mixture tried with at least as many query-key parameters (H r >= d);
  measured: the largest ratio full-rank error / best such mixture's error, over d; < 1.
- low-rank-worsens-with-d: rank-1 heads' error at the largest H grows with d (the plateau
  worsens with the width); measured: error at the largest d minus at the smallest; > 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse.experiments._registry import Claim, Experiment, Summary, Unit, register
from rankcollapse.plot import band_plot, line_plot

NAME = "amsel2024-constructions"
FIT_SEED_OFFSET, EVAL_SEED_OFFSET = 1_000, 2_000  # fit and score samples: separate streams


class Config(BaseModel):
    """Constructions scored on fresh nearest-neighbour samples."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    full_rank_d_models: list[int] = Field(default_factory=lambda: [8, 16], min_length=1)
    """Widths d of the full-rank part."""
    n_points: int = Field(16, ge=1, le=4096)
    """Points per set N in the full-rank part."""
    temperatures: list[float] = Field(
        default_factory=lambda: [1, 3, 10, 30, 100, 300, 1e3, 3e3, 1e4], min_length=2
    )
    """Temperatures t of the full-rank head (increasing)."""
    low_rank_d_models: list[int] = Field(default_factory=lambda: [4, 8], min_length=1)
    """Widths d of the low-rank part (N = 2 orthonormal points)."""
    ranks: list[int] = Field(default_factory=lambda: [1, 2], min_length=1)
    """Query-key ranks r of the random heads (those >= d are skipped)."""
    n_heads: list[int] = Field(default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], min_length=1)
    """Numbers of random heads H."""
    fit_samples: int = Field(20_000, ge=100, le=10_000_000)
    """Samples for the least-squares fit of the output maps."""
    eval_samples: int = Field(20_000, ge=100, le=10_000_000)
    """Fresh samples every error is measured on."""
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
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
    low = [
        {"part": "low-rank", "d_model": d, "seed": s}
        for d in config.low_rank_d_models
        for s in config.seeds
    ]
    return full + low


def _score(layer, batch) -> float:
    import torch

    from rankcollapse.tasks import relative_mse

    with torch.no_grad():
        return float(relative_mse(layer(batch.queries, batch.x), batch.target))


def run_unit(config: Config, unit: Unit) -> pd.DataFrame:
    import torch

    from rankcollapse.tasks import NeighbourTask
    from rankcollapse.theory.amsel import (
        fit_output_maps,
        full_rank_error_two_points,
        full_rank_head,
        qk_parameters,
        random_low_rank_heads,
    )

    d, seed = unit["d_model"], unit["seed"]
    sample = lambda task, n, offset: task.sample(
        n, torch.Generator().manual_seed(offset + seed), torch.float64
    )
    rows = []
    row = lambda **kw: rows.append({**unit, "d_qk": d, "n_heads": 1, "temperature": np.nan, **kw})
    if unit["part"] == "full-rank":
        batch = sample(NeighbourTask(d, config.n_points), config.eval_samples, EVAL_SEED_OFFSET)
        for t in config.temperatures:
            row(temperature=t, metric="rel_mse", value=_score(full_rank_head(d, t).layer, batch))
            row(
                temperature=t,
                metric="rel_mse_n2_closed_form",
                value=full_rank_error_two_points(d, t),
            )
        row(metric="rel_mse_hardmax", value=_score(full_rank_head(d, 1.0, hard=True).layer, batch))
        return pd.DataFrame(rows)
    task = NeighbourTask(d, 2, points="orthogonal")
    fit = sample(task, config.fit_samples, FIT_SEED_OFFSET)
    held_out = sample(task, config.eval_samples, EVAL_SEED_OFFSET)
    t_max = max(config.temperatures)
    row(temperature=t_max, metric="rel_mse", value=_score(full_rank_head(d, t_max).layer, held_out))
    row(metric="qk_parameters", value=qk_parameters(d, d, 1))
    for r in (r for r in config.ranks if r < d):
        for h in config.n_heads:
            heads = random_low_rank_heads(d, r, h, seed=seed)
            fitted = fit_output_maps(heads, fit.x, fit.queries, fit.target)
            ids = {"d_qk": r, "n_heads": h}
            row(**ids, metric="rel_mse", value=_score(fitted.layer, held_out))
            row(**ids, metric="qk_parameters", value=qk_parameters(d, r, h))
    return pd.DataFrame(rows)


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    full = results[(results.part == "full-rank") & (results.metric == "rel_mse")].copy()
    full["d"] = "d=" + full.d_model.astype(str)
    closed = results[results.metric == "rel_mse_n2_closed_form"].drop_duplicates(
        ["d_model", "temperature"]
    )
    low = results[results.part == "low-rank"]
    errors = low[low.metric == "rel_mse"].merge(
        low[low.metric == "qk_parameters"][["d_model", "d_qk", "n_heads", "seed", "value"]],
        on=["d_model", "d_qk", "n_heads", "seed"],
        suffixes=("", "_qk_parameters"),
    )
    mixtures = errors[errors.d_qk < errors.d_model].copy()
    mixtures["heads"] = "d=" + mixtures.d_model.astype(str) + ", r=" + mixtures.d_qk.astype(str)

    figures = {
        "full_rank_vs_temperature": band_plot(
            full,
            x="temperature",
            hue="d",
            logx=True,
            logy=True,
            floor_column=None,
            title=f"Full-rank head, N={config.n_points}: relative MSE vs temperature",
            ylabel="relative MSE",
        ),
        "full_rank_n2_closed_form": line_plot(
            closed.assign(d="d=" + closed.d_model.astype(str)),
            x="temperature",
            hue="d",
            logx=True,
            logy=True,
            title="Full-rank head, N=2 orthonormal: closed form",
            ylabel="relative MSE",
        ),
        "low_rank_vs_heads": band_plot(
            mixtures,
            x="n_heads",
            hue="heads",
            logx=True,
            logy=False,
            floor_column=None,
            title="Random low-rank heads, fitted, N=2: error vs H",
            ylabel="relative MSE",
        ),
    }
    mean_full = full.groupby(["d_model", "temperature"]).value.mean().unstack("d_model")
    claims = [
        Claim.check(
            "full-rank-falls",
            "one full-rank head's error falls monotonically with the temperature, below 1e-3 "
            f"at t={max(config.temperatures):g} (N={config.n_points})",
            "largest final error over d (0 if any curve rises)",
            float(mean_full.iloc[-1].max())
            if bool((mean_full.diff().iloc[1:] <= 0).all().all())
            else float("inf"),
            "<",
            1e-3,
        )
    ]
    if len(mixtures):
        per_d = mixtures.groupby(["d_model", "d_qk", "n_heads"]).value.mean().reset_index()
        budget = mixtures.groupby(["d_model", "d_qk", "n_heads"]).value_qk_parameters.first()
        per_d["qk_parameters"] = budget.values
        full_low = errors[errors.d_qk == errors.d_model].groupby("d_model").value.mean()
        ratios = []
        for d, group in per_d.groupby("d_model"):
            rich = group[group.qk_parameters >= 2 * d * d]
            if len(rich):
                ratios.append(full_low[d] / rich.value.min())
        claims.append(
            Claim.check(
                "full-rank-beats-low-rank",
                "at equal (or larger) query-key parameter budget, one full-rank head beats every "
                "random low-rank mixture tried",
                "max over d of full-rank error / best low-rank error (H r >= d)",
                max(ratios) if ratios else float("nan"),
                "<",
                1.0,
                note=f"full rank at t={max(config.temperatures):g}, N=2 orthonormal points",
            )
        )
        rank1 = per_d[(per_d.d_qk == 1) & (per_d.n_heads == per_d.n_heads.max())]
        if rank1.d_model.nunique() >= 2:
            by_d = rank1.set_index("d_model").value.sort_index()
            claims.append(
                Claim.check(
                    "low-rank-worsens-with-d",
                    f"rank-1 heads' error at H={int(per_d.n_heads.max())} grows with the width d",
                    f"error at d={by_d.index[-1]} minus at d={by_d.index[0]}",
                    float(by_d.iloc[-1] - by_d.iloc[0]),
                    ">",
                    0.0,
                )
            )
    table = pd.concat(
        [
            full.groupby(["d_model", "temperature"])
            .value.agg(["mean", "std"])
            .reset_index()
            .assign(part="full-rank"),
            errors.groupby(["d_model", "d_qk", "n_heads"])
            .value.agg(["mean", "std"])
            .reset_index()
            .assign(part="low-rank"),
        ],
        ignore_index=True,
    )
    hardmax = results[results.metric == "rel_mse_hardmax"].value
    notes = [f"hardmax full-rank head: largest relative MSE {hardmax.max():.3g} (exact: 0)"]
    return Summary(tables={"errors": table}, figures=figures, claims=claims, notes=notes)


register(
    Experiment(
        name=NAME,
        description="Full-rank head vs random low-rank heads, constructed (Amsel et al. 2024)",
        config=Config,
        presets=PRESETS,
        units=units,
        run_unit=run_unit,
        summarize=summarize,
    )
)
