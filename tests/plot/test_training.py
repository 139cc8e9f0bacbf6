"""The training figures draw the quantity they are given: means per (layer, step), a shared
colour scale, floor cells apart, at most six curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rankcollapse.errors import InputError
from rankcollapse.plot import training_curves, training_heatmap


def monitor_rows(arms=("a",), layers=3, steps=(0, 10, 20), floor_at=None) -> pd.DataFrame:
    rows = []
    for arm in arms:
        for step in steps:
            for layer in range(layers):
                for sample in (0, 1):
                    value = 10.0 ** -(layer * (1 + step / 10)) * (1 + sample)
                    rows.append({"arm": arm, "step": step, "layer": layer, "variant": "transformer",
                                 "sample": sample, "metric": "mu_rel", "value": value,
                                 "at_floor": (step, layer) == floor_at})  # fmt: skip
    return pd.DataFrame(rows)


def test_heatmap_shows_the_sample_mean_of_every_layer_and_step():
    fig = training_heatmap(monitor_rows(), metric="mu_rel")
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (3, 3)  # layers x steps
    assert image[2, 1] == pytest.approx(1.5 * 10.0**-4)  # layer 2, step 10: mean of 1x and 2x
    assert fig.axes[0].images[0].norm.__class__.__name__ == "LogNorm"


def test_heatmap_panels_share_one_colour_scale_and_grey_out_floor_cells():
    frame = monitor_rows(arms=("a", "b"), floor_at=(20, 2))
    fig = training_heatmap(frame, metric="mu_rel", panel="arm")
    norms = {id(ax.images[0].norm) for ax in fig.axes if ax.images}
    assert len(norms) == 1
    assert np.ma.is_masked(fig.axes[0].images[0].get_array()[2, 2])
    assert "dtype floor" in fig.axes[-1].get_ylabel()


def test_curves_draw_at_most_six_layers_from_input_to_last():
    fig = training_curves(monitor_rows(layers=10), metric="mu_rel")
    labels = [t.get_text() for t in fig.legends[0].get_texts() if t.get_text().isdigit()]
    assert labels == ["0", "2", "4", "5", "7", "9"]


def test_a_missing_metric_or_column_is_named():
    with pytest.raises(InputError, match="metric 'cos_mean' is not in the frame"):
        training_heatmap(monitor_rows(), metric="cos_mean")
    with pytest.raises(InputError, match=r"no column\(s\) \['step'\]"):
        training_curves(monitor_rows().drop(columns="step"), metric="mu_rel")
