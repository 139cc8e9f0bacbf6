"""Figures of singular spectra of hidden states (Wu et al. 2024, geometry of pretrained models)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from rankcollapse.frames import check_frame


def singular_spectra(spectra: pd.DataFrame) -> Figure:
    """sigma_i / sigma_1 of sample 0 at the first, middle and last layer, a panel per model.

    Rows (model, init, layer, sample, index i, value = sigma_i / sigma_1).
    """
    columns = ["model", "init", "layer", "sample", "index", "value"]
    check_frame(
        spectra, columns, ["value"], f"pass rows {tuple(columns)}, as wu2024-geometry writes"
    )
    keys = list(spectra.groupby(["model", "init"], sort=False).groups)
    fig = Figure(figsize=(4.0 * len(keys), 3.4), layout="constrained")
    axes = fig.subplots(1, len(keys), squeeze=False, sharey=True)[0]
    for ax, (model, init) in zip(axes, keys, strict=True):
        part = spectra[(spectra["model"] == model) & (spectra["init"] == init)]
        part = part[part["sample"] == 0]
        layers = sorted(part["layer"].unique())
        shown = sorted({layers[0], layers[len(layers) // 2], layers[-1]})
        for i, layer in enumerate(shown):
            curve = part[part["layer"] == layer].sort_values("index")
            ax.plot(curve["index"], curve["value"], color=f"C{i}", label=f"layer {layer}")
        ax.set_yscale("log")
        ax.set_title(f"{model} ({init})", fontsize=10)
        ax.set_xlabel("index i")
        ax.legend(fontsize=7)
    axes[0].set_ylabel("sigma_i / sigma_1 (sample 0)")
    fig.suptitle("Singular spectra of the hidden states", fontsize=10)
    return fig
