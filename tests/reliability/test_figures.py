"""Figures a newcomer meets: `compare` at the quality of the probe's (the panel keeps its
height beside the legend, labels and title inside the figure, a title naming the folders), and
floor-share labels (k/n) that never overlap, even in dense panels."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Annotation

from rankcollapse.cli import main
from rankcollapse.plot import band_plot, layers


def _drawn(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _dense_frame(n_layers: int = 48, n_series: int = 6) -> pd.DataFrame:
    """Six masks' curves over 48 layers, at the floor from layer 10 on in every sample of one
    layer and in 3 of 8 of the next (a label each time), as wu2024-masks' toy and causal
    panels."""
    rng = np.random.default_rng(0)
    rows = []
    for s, layer, sample in itertools.product(range(n_series), range(n_layers), range(8)):
        floor = layer >= 10 and sample < (8 if (layer + s) % 2 else 3)
        value = 1e-9 if floor else 0.5 ** (layer / 4) * (1 + 0.1 * rng.random())
        rows.append({"mask": f"mask {s}", "layer": layer, "sample": sample,
                     "metric": "mu_rel", "value": value, "at_floor": floor})  # fmt: skip
    return pd.DataFrame(rows)


@pytest.mark.parametrize("draw", ["layers", "band_plot"])
def test_floor_share_labels_never_overlap_in_a_dense_panel(draw):
    frame = _dense_frame()
    if draw == "layers":
        fig = layers(frame, by="mask", floor=1e-8)
    else:
        fig = band_plot(frame, hue="mask", y="value", floor_column="at_floor", floor=1e-8)
    renderer = _drawn(fig)
    labels = [a for a in fig.findobj(Annotation) if a.get_gid() == "floor-share"]
    assert len(labels) >= 6  # every series keeps labels
    boxes = [a.get_window_extent(renderer) for a in labels]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)


def test_compare_draws_the_probe_s_quality_and_names_the_folders(tmp_path, capsys):
    for name, skip in (("skip", "on"), ("noskip", "off")):
        assert main(["simulate", "--n-layers", "6", "--skip", skip, "--n-samples", "4",
                     "--n-tokens", "8", "--no-figures", "--out", str(tmp_path / name)]) == 0  # fmt: skip
    from rankcollapse.cli.compare import compare_title, load_runs

    dirs = [tmp_path / "skip", tmp_path / "noskip"]
    frame = load_runs(dirs)
    frame = frame[frame.metric == "res_comp_rel"]
    fig = layers(frame, metric="res_comp_rel", by="series", title=compare_title(frame, dirs),
                 width=5.0)  # fmt: skip
    renderer = _drawn(fig)
    whole = fig.bbox
    (ax,) = [a for a in fig.axes if a.get_visible()]
    assert ax.get_position().height >= 0.4  # the panel, not the legend, fills the figure
    for text in [fig._suptitle, ax.title, ax.xaxis.label, *ax.get_yticklabels()]:
        box = text.get_window_extent(renderer)
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and box.y1 <= whole.y1, text
    title = fig._suptitle.get_text().replace("\n", " ")
    assert "2 curves compared per layer" in title and "skip=on" in title
    assert main(["compare", *map(str, dirs), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "compare.png").stat().st_size > 10_000
