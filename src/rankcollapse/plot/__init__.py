"""Figures in one style, from tidy frames, for reports, the CLI and notebooks.

    from rankcollapse import plot
    fig = plot.layers(frame, metric="res_comp_rel", by="model")   # a matplotlib Figure

Every function returns a `matplotlib.figure.Figure` and touches no file; `render(fig)` gives
its PNG (200 dpi) and SVG bytes. `rankcollapse.plot.style` holds the sizes, palette, ticks
and label helpers every figure of the project uses.
"""

from rankcollapse.plot import style
from rankcollapse.plot.amsel import construction_figures, depth_figures
from rankcollapse.plot.bounds import dong_bound_figure, wu_bound_figure
from rankcollapse.plot.circle import circle_distances, circle_trajectories
from rankcollapse.plot.curves import band_plot, layers, line_plot, ordered_values
from rankcollapse.plot.equilibria import counterexample_basin, counterexample_trajectories
from rankcollapse.plot.heatmap import heatmap
from rankcollapse.plot.masks import mask_panels
from rankcollapse.plot.paths import length_figures, path_accuracy_figure, products_figure
from rankcollapse.plot.spectra import singular_spectra
from rankcollapse.plot.style import fraction, render, words
from rankcollapse.plot.training import training_curves, training_heatmap

__all__ = [
    "band_plot",
    "circle_distances",
    "circle_trajectories",
    "construction_figures",
    "counterexample_basin",
    "counterexample_trajectories",
    "depth_figures",
    "dong_bound_figure",
    "fraction",
    "heatmap",
    "layers",
    "length_figures",
    "line_plot",
    "mask_panels",
    "ordered_values",
    "path_accuracy_figure",
    "products_figure",
    "render",
    "singular_spectra",
    "style",
    "training_curves",
    "training_heatmap",
    "words",
    "wu_bound_figure",
]
