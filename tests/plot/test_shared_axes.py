"""Small multiples that can be compared by eye: one y range per metric, its label once per row,
tick labels on every bottom panel, floor lines only where the floor is a value on the axis,
and log axes wherever a quantity spans decades."""

from __future__ import annotations

import pandas as pd
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from rankcollapse import metrics, plot
from rankcollapse.plot import curves


def _compare_frame(n_series: int = 8) -> pd.DataFrame:
    rows = []
    for k in range(n_series):
        for layer in range(4):
            for sample in range(2):
                for metric, value in (("res_comp_rel", 0.5 ** (layer * (k + 1))),
                                      ("cos_mean", 0.2 + 0.1 * k * layer / 4)):  # fmt: skip
                    rows.append({"layer": layer, "sample": sample, "metric": metric,
                                 "value": value * (1 + 0.01 * sample), "at_floor": False,
                                 "series": f"folder {k}"})  # fmt: skip
    return pd.DataFrame(rows)


def _shown(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


def test_small_multiples_share_one_y_range_per_metric_labelled_on_the_left():
    fig = plot.layers(_compare_frame(), by="series")
    axes = _shown(fig)
    assert len(axes) == 16
    for group in (axes[:8], axes[8:]):  # a metric's panels: whole rows of their own
        assert len({ax.get_ylim() for ax in group}) == 1
        rows = {ax.get_subplotspec().rowspan.start for ax in group}
        assert len(rows) == 3
    assert axes[8].get_subplotspec().rowspan.start == 3  # the second metric starts a new row
    assert axes[0].get_yscale() == "log" and axes[8].get_yscale() == "linear"
    assert (
        axes[0].get_ylim()[0] <= 0.5**24
    )  # layer 3 of folder 7  # the steepest series sets the shared range
    for ax in axes:
        left = ax.get_subplotspec().colspan.start == 0
        assert bool(ax.get_ylabel()) == left
        assert ax.yaxis.get_tick_params()["labelleft"] == left
        assert ax.get_title().startswith("folder ")  # the metric is the y label, not the title
    assert "relative residual" in axes[0].get_ylabel()


def test_every_bottom_panel_has_tick_labels_even_above_an_empty_cell():
    df = _compare_frame(4).assign(arm=lambda f: f["series"])
    fig = plot.band_plot(df[df["metric"] == "res_comp_rel"], hue=None, panel="arm")
    axes = _shown(fig)
    assert len(axes) == 4  # 3 + 1: columns 1 and 2 end in the first row
    labelled = [ax.xaxis.get_tick_params()["labelbottom"] for ax in axes]
    assert labelled == [False, True, True, True]
    assert [bool(ax.get_xlabel()) for ax in axes] == [False, True, True, True]


def _floor_frame() -> pd.DataFrame:
    rows = []
    for metric, scale in (("min_sv", 100.0), ("min_sv_rel", 1.0)):
        for layer in range(3):
            for sample in range(2):
                at_floor = layer == 2 and sample == 0
                value = 1e-9 if at_floor else scale * 0.1**layer
                rows.append({"layer": layer, "sample": sample, "metric": metric, "value": value,
                             "at_floor": at_floor, "variant": "san"})  # fmt: skip
    return pd.DataFrame(rows)


def _floor_lines(ax, value: float) -> list:
    return [line for line in ax.get_lines() if list(line.get_ydata()) == [value, value]]


def test_a_relative_floor_is_drawn_only_on_relative_metrics():
    value = metrics.dtype_floor(torch.float32)
    absolute, relative = plot.layers(_floor_frame(), floor=torch.float32).axes
    assert _floor_lines(relative, value) and not _floor_lines(absolute, value)
    # the absolute metric's floor markers sit at its axis bottom, its data near 1e0..1e2
    assert absolute.get_ylim()[0] > value
    texts = [" ".join(t.get_text().split()) for t in absolute.figure.legends[0].get_texts()]
    assert any("on an absolute metric: its axis bottom" in t for t in texts)


def test_the_absolute_metrics_are_those_the_registry_scales_by_the_input():
    expected = {name for name, info in metrics.METRICS.items() if info.relative is not None}
    assert expected == curves.ABSOLUTE


def test_a_quantity_spanning_decades_goes_on_a_log_axis():
    assert plot.spans_decades(pd.Series([1.0, 0.3, 1e-3]))
    assert not plot.spans_decades(pd.Series([1.0, 0.05, 0.0]))
    assert not plot.spans_decades(pd.Series([], dtype=float))


def test_small_multiples_labels_lie_inside_the_figure_and_apart():
    fig = plot.layers(_compare_frame(), by="series", title="16 curves of 2 folders compared")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    box = fig.bbox
    texts = [t for ax in _shown(fig) for t in (ax.title, ax.yaxis.label) if t.get_text()]
    extents = [t.get_window_extent(renderer) for t in texts]
    for extent in extents:
        assert box.x0 <= extent.x0 and extent.x1 <= box.x1 and box.y0 <= extent.y0
        assert extent.y1 <= box.y1
    titles = [ax.title.get_window_extent(renderer) for ax in _shown(fig)]
    assert not any(a.overlaps(b) for i, a in enumerate(titles) for b in titles[i + 1 :])
