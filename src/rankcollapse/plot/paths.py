"""Figures of path decompositions (Dong, Cordonnier, Loukas 2021, Sec. 3)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.plot.style import log_axis, new_figure


def products_figure(products: pd.DataFrame) -> Figure:
    """Per model: boxes of the rank-1 distance of sampled path products per path length.

    Rows (model, length, value); at most three panels a row, sharing the distance axis.
    """
    models = list(dict.fromkeys(products["model"]))
    fig, axes = new_figure(len(models), sharex=False, sharey=True)
    for ax, model in zip(axes, models):
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
