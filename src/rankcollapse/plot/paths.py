"""Figures of path decompositions (Dong, Cordonnier, Loukas 2021, Sec. 3)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib import ticker
from matplotlib.figure import Figure

from rankcollapse.plot.curves import band_plot, line_plot, ordered_values
from rankcollapse.plot.style import log_axis, new_figure

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.typing import LineStyleType


def products_figure(products: pd.DataFrame) -> Figure:
    """Per model: boxes of the rank-1 distance of sampled path products per path length.

    Rows (model, length, value); at most three panels a row, sharing the distance axis.
    """
    models = list(dict.fromkeys(products["model"]))
    fig, axes = new_figure(len(models), sharex=False, sharey=True)
    for ax, model in zip(axes, models, strict=True):
        rows = products[products["model"] == model]
        lengths = sorted(rows["length"].unique())
        data = [rows.loc[rows["length"] == k, "value"].clip(lower=1e-17) for k in lengths]
        ax.boxplot(data, positions=lengths, widths=0.6)
        ticks = lengths[:: max(1, len(lengths) // 8)]
        ax.set_xticks(ticks, [str(k) for k in ticks])  # boxplot labels boxes 1..n otherwise
        log_axis(ax)
        ax.set_title(model)
        ax.set_xlabel("path length k")
    axes[0].set_ylabel(r"$\|P_{path} - \mathrm{rank\,1}\|_F \,/\, \|P_{path}\|_F$")
    fig.suptitle("Products of attention along sampled paths: distance to rank 1")
    return fig


# column of the reference table -> legend label, colour, line style
REFERENCE_LINES: dict[str, tuple[str, str, LineStyleType]] = {
    "full model": ("full model", "k", "--"),
    "position_majority": ("majority class per position", "0.3", (0, (5, 1, 1, 1))),
    "majority": ("majority class", "0.45", ":"),
    "random": ("random guess", "0.6", "-."),
}


def length_figures(results: pd.DataFrame) -> dict[str, Figure]:
    """The figures of a per-length decomposition, one series per `label` (a model and init).

    Rows of `rankcollapse.paths.length_frame` and `products_frame` with a `label` column: the
    share <C_k, X^L> / ||X^L||^2 and the norm ratio ||C_k|| / ||X^L|| per length, the collapse
    (res_comp_rel) of each component, and the products of attention along sampled paths.
    """
    share = results[results["metric"] == "share"]
    products = results[results["metric"] == "rank1_dist"]
    lengths = results[results["length"] >= 0]
    per_length: dict[str, Any] = {"x": "length", "hue": "label", "logy": True}
    return {
        "share of the output per length": line_plot(
            share[share["length"] >= 0],
            x="length",
            hue="label",
            title="Share <C_k, X^L> / ||X^L||^2 per path length",
            ylabel="share",
        ),
        "norm of each length's component": band_plot(
            lengths[lengths["metric"] == "norm_ratio"],
            floor_column=None,
            ylabel="norm ratio",
            title="||C_k|| / ||X^L|| per path length",
            **per_length,
        ),
        "collapse of each length's component": band_plot(
            lengths[lengths["metric"] == "res_comp_rel"],
            ylabel="relative residual",
            title="res_comp_rel of C_k",
            **per_length,
        ),
        "attention products vs rank 1": products_figure(products.assign(model=products["label"])),
    }


def path_accuracy_figure(
    paths: pd.DataFrame,
    reference: pd.DataFrame,
    floors: Mapping[str, float],
    *,
    margin: float,
    title: str,
) -> Figure:
    """Accuracy against path length k >= 1, one line per n_paths (band: std over repeats and
    seeds), k = 0 hollow; the full model, the baselines and the margin a best length must clear
    (above the paper's baseline, `floors` per task).

    `paths`: rows (task, n_paths, length, value); `reference`: per task (index) the full model
    and the baselines; Dong, Cordonnier, Loukas 2021, Sec. 5, Fig. 4.
    """
    data = paths.assign(**{"paths kept": paths["n_paths"].map(lambda n: f"{n} paths")})
    sizes = ordered_values(data["paths kept"])
    figure = band_plot(
        data[data["length"] >= 1],
        x="length",
        hue="paths kept",
        panel="task",
        logy=False,
        title=title,
        ylabel="accuracy",
        floor_column=None,
    )
    styles = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-.")]
    for ax, task in zip(figure.axes, ordered_values(data["task"]), strict=True):
        ax.set_title(task, fontsize=10)
        for line in ax.get_lines():  # one marker and line style per n_paths, beside its colour
            if line.get_label() in sizes:
                marker, style = styles[sizes.index(line.get_label()) % len(styles)]
                line.set(marker=marker, linestyle=style)
        ref = reference.loc[task]
        own: list[Artist] = [
            ax.plot(
                [0],
                [data.loc[(data["task"] == task) & (data["length"] == 0), "value"].mean()],
                "o",
                mfc="none",
                mec="k",
                ms=6,
                label="k = 0 (the embedding alone)",
            )[0]
        ]
        for column, (label, color, line_style) in REFERENCE_LINES.items():
            if column in ref and np.isfinite(ref[column]):
                own.append(ax.axhline(ref[column], color=color, ls=line_style, lw=1, label=label))
        floor = floors[task]
        own.append(
            ax.axhspan(
                floor,
                floor + margin,
                color="0.8",
                alpha=0.5,
                lw=0,
                label="margin a best length must clear",
            )
        )
        ax.set_xlabel("path length k")
        ax.set_xlim(-0.5, data["length"].max() + 0.5)  # k = 0 in view: the claims compare with it
        locator = ax.xaxis.get_major_locator()
        if isinstance(locator, ticker.MaxNLocator):  # a linear axis's AutoLocator
            locator.set_params(integer=True)
        ax.legend(handles=own, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.36))
    return figure
