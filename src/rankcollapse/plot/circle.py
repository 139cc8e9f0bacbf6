"""Figures of the circle experiment: two tokens under a trained attention layer applied
recurrently (Dong, Cordonnier, Loukas 2021, Sec. 6, Fig. 5)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.plot.curves import line_plot


def _outcome(run: pd.Series) -> str:
    if not run["learned"]:
        return "not learned"
    if run["diverged"]:
        return "diverged"
    return "merged" if run["merged"] else "apart"


TRAJECTORY_SEEDS = 8  # panels per variant: the first seeds (200 would make a figure 380 in wide)
SEED_TICKS = 12  # seed labels on a share panel at most (more overlap at the report's size)


def circle_trajectories(
    results: pd.DataFrame,
    table: pd.DataFrame,
    *,
    variants: Sequence[str],
    labels: Mapping[str, str],
    radius: float,
    n_steps: int,
) -> Figure:
    """Small multiples: a row per variant, a panel per seed (the first TRAJECTORY_SEEDS), the
    two token paths and the circle.

    `results`: rollout rows (variant, seed, token, step, metric x/y); `table`: one row per run
    with learned, diverged, merged (its outcome from the first training pair, in each panel's title).
    """
    variants = [v for v in variants if v in set(results["variant"])]
    every_seed = sorted(set(results["seed"]))
    seeds = every_seed[:TRAJECTORY_SEEDS]
    figure = Figure(figsize=(1.9 * len(seeds) + 0.6, 2.0 * len(variants)), layout="constrained")
    axes = figure.subplots(len(variants), len(seeds), squeeze=False)
    angles = np.linspace(0, 2 * math.pi, 200)
    outcome = {(r["variant"], r["seed"]): _outcome(r) for _, r in table.iterrows()}
    for row, variant in zip(axes, variants, strict=True):
        for ax, seed in zip(row, seeds, strict=True):
            part = results[(results["variant"] == variant) & (results["seed"] == seed)]
            ax.plot(radius * np.cos(angles), radius * np.sin(angles), color="0.85")
            for token, (color, style) in enumerate((("C0", "-"), ("C3", "--"))):
                xy = part[part["token"] == token].pivot_table(
                    index="step", columns="metric", values="value"
                )
                ax.plot(xy["x"], xy["y"], color=color, ls=style, lw=1, label=f"token {token + 1}")
                ax.plot(xy["x"].iloc[:1], xy["y"].iloc[:1], "o", color=color, ms=4)
                ax.plot(xy["x"].iloc[-1:], xy["y"].iloc[-1:], "x", color=color, ms=6)
            ax.set_title(f"seed {seed}: {outcome.get((variant, seed), 'missing')}", fontsize=8)
            ax.set_aspect("equal", adjustable="datalim")
            ax.tick_params(labelsize=6)
        row[0].set_ylabel(labels[variant], fontsize=9)
    axes[0][0].legend(fontsize=6)
    shown = (
        ""
        if len(seeds) == len(every_seed)
        else f"; the first {len(seeds)} of {len(every_seed)} seeds"
    )
    figure.suptitle(f"Trained layer applied {n_steps} times (o start, x end{shown})", fontsize=10)
    return figure


def circle_shares(
    shares: pd.DataFrame,
    means: Mapping[str, tuple[float, float]],
    *,
    labels: Mapping[str, str],
    majority: float,
) -> Figure:
    """A panel per variant: each run's share of off-arc rollouts with its finding's outcome
    (filled: the run learned the step; hollow: it did not and counts for nothing), the mean
    over the learned runs with the interval its finding is decided by, and the majority line.

    `shares`: variant, seed, outcome, learned, share (one row per configured run); `means`:
    variant -> (mean, the interval's half-width) over its learned runs."""
    variants = list(dict.fromkeys(shares["variant"]))
    figure = Figure(figsize=(2.6 * len(variants) + 0.4, 2.9), layout="constrained")
    axes = figure.subplots(1, len(variants), squeeze=False, sharey=True)[0]
    for ax, variant in zip(axes, variants, strict=True):
        part = shares[shares["variant"] == variant]
        for learned, face in ((True, "C0"), (False, "none")):
            runs = part[part["learned"] == learned]
            ax.plot(runs["seed"], runs["share"], "o", mfc=face, mec="C0", ms=6,
                    label="learned" if learned else "not learned")  # fmt: skip
        mean, error = means[variant]
        if not math.isnan(mean):
            ax.axhline(mean, color="C0", lw=1.2, label="mean of the learned runs")
            if not math.isnan(error):
                ax.axhspan(mean - error, mean + error, color="C0", alpha=0.15, lw=0)
        ax.axhline(majority, color="0.4", ls="--", lw=0.8, label=f"majority ({majority})")
        ax.set_ylim(-0.05, 1.05)
        n_learned = f"{int(part['learned'].sum())} of {len(part)} learned"
        ax.set_title(
            f"{labels[variant]}: share {part['outcome'].iloc[0]}\n({n_learned})", fontsize=9
        )
        ax.set_xlabel("seed")
        seeds = sorted(part["seed"])
        ax.set_xticks(seeds[:: math.ceil(len(seeds) / SEED_TICKS)])
    axes[0].set_ylabel("share of off-arc rollouts")
    handles, names = axes[0].get_legend_handles_labels()
    figure.legend(handles, names, loc="outside lower center", ncols=4, fontsize=7, numpoints=1)
    figure.suptitle(
        "Off the training arcs: each run's share of rollouts with the finding's outcome "
        "(band: the 95% interval the finding is decided by)",
        fontsize=9,
    )
    return figure


def circle_distances(
    results: pd.DataFrame,
    table: pd.DataFrame,
    *,
    variants: Sequence[str],
    labels: Mapping[str, str],
    merged: float,
) -> Figure:
    """Token distance / starting distance against the step from the first training pair, one
    line per seed (dotted: the fit did not learn the step), with the merged threshold."""
    distance = results[results["metric"] == "distance"]
    start = distance[distance["step"] == 0].set_index(["variant", "seed"])["value"]
    keys = pd.MultiIndex.from_frame(distance[["variant", "seed"]])
    relative = distance.assign(
        value=distance["value"].to_numpy() / start.reindex(keys).to_numpy(),
        run=distance["seed"].map(lambda s: f"seed {s}"),
        variant=distance["variant"].map(labels),
    )
    figure = line_plot(
        relative,
        x="step",
        hue="run",
        panel="variant",
        logy=True,
        title=f"From the first training pair. Dotted: the fit did not beat predicting the "
        f"input (not learned). Dashed line: merged below {merged}",
        ylabel="distance / starting distance",
    )
    learned = table.set_index(["variant", "seed"])["learned"]
    for ax, variant in zip(figure.axes, [v for v in variants if v in learned.index], strict=True):
        ax.set_title(labels[variant], fontsize=10)
        for line in ax.get_lines():
            seed = int(str(line.get_label()).removeprefix("seed "))
            line.set(marker="", linestyle="-" if learned.get((variant, seed), False) else ":")
        ax.axhline(merged, color="0.4", ls="--", lw=0.8)
        ax.set_xlabel("recurrent step")
    return figure
