"""Figures of measured collapse against the papers' bounds (Dong et al. 2021; Wu et al. 2024)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.masks import MaskSpec
from rankcollapse.theory import collapse_rate, mask_radius, thm1_log_bound


def dong_bound_figure(
    results: pd.DataFrame,
    *,
    variants: Sequence[str],
    levels: Sequence[float],
    n_layers: int,
    gamma: float,
) -> Figure:
    """Per variant: measured sqrt(c) r_l per level (median, band min..max over sequences and
    seeds, values above the float64 floor) and the bound (sqrt(c) r_0)^{3^l} of that level.

    Rows of `rankcollapse.theory.bound_frame` with (variant, seed, level) columns; Dong et al.
    2021, Thm 2.2 / Cor 2.3 (unrolled: sqrt(c) r_L <= (sqrt(c) r_0)^{3^L}).
    """
    fig = Figure(figsize=(3.2 * len(variants), 3.2), layout="constrained")
    axes = fig.subplots(1, len(variants), squeeze=False, sharey=True)[0]
    layers = np.arange(n_layers + 1)
    c = results[results["metric"] == "c"].set_index(["variant", "seed", "sample"])["value"]
    for ax, variant in zip(axes, variants, strict=True):
        rows = results[(results["variant"] == variant) & (results["metric"] == "log10_r")]
        rows = rows[~rows["at_floor"].astype(bool)]
        half_c = 0.5 * np.log10(
            c.reindex(pd.MultiIndex.from_frame(rows[["variant", "seed", "sample"]])).to_numpy()
        )
        rows = rows.assign(s=rows["value"] + half_c)
        for i, level in enumerate(levels):
            stats = rows[rows["level"] == level].groupby("layer")["s"].agg(["median", "min", "max"])
            color = f"C{i}"
            ax.plot(
                stats.index,
                10 ** stats["median"],
                "o-",
                ms=3,
                color=color,
                label=f"measured, level {level:g}",
            )
            ax.fill_between(
                stats.index, 10 ** stats["min"], 10 ** stats["max"], color=color, alpha=0.2, lw=0
            )
            ax.plot(layers, level ** (3.0**layers), "--", color=color, label=f"bound, {level:g}")
        ax.set_yscale("log")
        ax.set_ylim(1e-20, 3)
        ax.set_xticks(layers)
        ax.set_title(variant + (" (pure-SAN bound)" if variant == "san+skip" else ""), fontsize=9)
        ax.set_xlabel("layer l")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(r"$\sqrt{c}\,\|res(X^l)\|_{1,\infty}$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center", fontsize=7)
    fig.suptitle(
        f"Measured residual vs the unrolled bound (sqrt(c) r_0)^(3^l), gamma = {gamma:g}; "
        "the finding checks the per-layer and chained bounds, which lie below these lines; "
        "values at the float64 floor are not drawn",
        fontsize=9,
    )
    return fig


def wu_bound_figure(
    results: pd.DataFrame,
    *,
    masks: Sequence[MaskSpec],
    norms: Sequence[str],
    seeds: Sequence[int],
    n_tokens: int,
) -> Figure:
    """Measured mu (geometric mean over samples, every seed) and Thm 1's bound, per mask.

    Rows (mask, norm, seed, layer, sample, metric, value, at_floor) with metrics `mu`, `eps`
    and `value_norm` (per layer, sample -1); the bound is Wu et al. 2024, Thm 1, with its
    constants computed (`rankcollapse.theory.thm1_log_bound`) from the geometric mean of
    mu(X^0) (no norm only).
    """
    fig = Figure(figsize=(2.6 * len(masks), 2.4 * len(norms)), layout="constrained")
    axes = fig.subplots(len(norms), len(masks), squeeze=False, sharey=True)
    for (i, norm), (j, mask) in ((a, b) for a in enumerate(norms) for b in enumerate(masks)):
        ax = axes[i, j]
        # the styles repeat past the seeds: the zip stops at the last seed
        for seed, style in zip(seeds, ("-", "--", ":", "-.") * 8, strict=False):
            part = results[
                (results["mask"] == mask) & (results["norm"] == norm) & (results["seed"] == seed)
            ]
            mu = part[part["metric"] == "mu"]
            log_mu = np.log(mu["value"].clip(lower=1e-300)).groupby(mu["layer"]).mean()
            log_mu = log_mu.iloc[: collapse_rate(mu).n_fit]  # the curve ends at the dtype floor
            ax.plot(log_mu.index, np.exp(log_mu), style, color="C0", label=f"mu, seed {seed}")
            r = mask_radius(mask, n_tokens)
            eps = part[part["metric"] == "eps"].sort_values("layer")["value"].to_numpy()
            value_norms = part[part["metric"] == "value_norm"].sort_values("layer")["value"]
            if norm == "none" and math.isfinite(r) and len(eps):
                log_b = thm1_log_bound(
                    eps, int(r), n_tokens, value_norms.to_numpy() if len(value_norms) else None
                )
                ax.plot(
                    np.arange(len(log_b)),
                    np.exp(log_mu.iloc[0] + log_b),
                    style,
                    color="C1",
                    label=f"bound, seed {seed}",
                )
        ax.set_yscale("log")
        ax.set_ylim(1e-17, None)
        ax.set_title(f"{mask}, norm {norm}", fontsize=9)
        ax.set_xlabel("layer")
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0, 0].set_ylabel("mu (geometric mean)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(
        "mu against layer (ending at the float64 floor) and Thm 1's bound (eps up to the "
        "layer, C = sqrt(N - 1) K mu(X^0) computed)",
        fontsize=10,
    )
    return fig
