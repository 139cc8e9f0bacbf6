"""Figures in one style, from tidy frames, for reports, the CLI and notebooks.

    from rankcollapse import plot
    fig = plot.layers(frame, metric="res_comp_rel", by="model")   # a matplotlib Figure

Every function returns a `matplotlib.figure.Figure` and touches no file; `render(fig)` gives
its PNG (200 dpi) and SVG bytes. `rankcollapse.plot.style` holds the sizes, palette, ticks
and label helpers every figure of the project uses.
"""

from typing import TYPE_CHECKING

from rankcollapse.lazy import lazy_names

if TYPE_CHECKING:
    from rankcollapse.plot.heatmaps import heatmap as heatmap

FORMATS = ("png", "svg")  # the files of every figure (`render`)

# public name -> its submodule, imported when the name is first used
_NAMES = {
    "band_plot": "curves",
    "circle_distances": "circle",
    "circle_shares": "circle",
    "circle_trajectories": "circle",
    "construction_figures": "amsel",
    "counterexample_basin": "equilibria",
    "counterexample_trajectories": "equilibria",
    "depth_figures": "amsel",
    "dong_bound_figure": "bounds",
    "fraction": "style",
    "heatmap": "heatmaps",
    "layers": "curves",
    "length_figures": "paths",
    "line_plot": "curves",
    "mask_panels": "masks",
    "ordered_values": "curves",
    "path_accuracy_figure": "paths",
    "products_figure": "paths",
    "render": "style",
    "singular_spectra": "spectra",
    "spans_decades": "curves",
    "style": "style",
    "words": "style",
    "wu_bound_figure": "bounds",
    "training_curves": "training",
    "training_heatmap": "training",
}
# every name but the style module is a function: one that a module imports at its top is
# loaded (with matplotlib) at its first call
__getattr__, __dir__ = lazy_names(__name__, _NAMES, deferred=set(_NAMES) - {"style"})
__all__ = sorted(_NAMES)  # noqa: PLE0605 (names of the lazy table above)
