"""The one figure style and the public plotting API: what a figure shows, checked on the
artists it draws (lines, bands, markers, ticks), not on pixels."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.collections import PolyCollection

from rankcollapse import plot
from rankcollapse.errors import InputError
from rankcollapse.metrics import dtype_floor
from rankcollapse.plot import style


def frame(values: dict[str, list[float]], floors: dict[str, list[bool]] | None = None,
          metric: str = "mu_rel") -> pd.DataFrame:  # fmt: skip
    """Rows (variant, layer, sample, metric, value, at_floor): values[variant][layer] per
    sample list."""
    rows = []
    for variant, per_layer in values.items():
        for layer, samples in enumerate(per_layer):
            for sample, value in enumerate(np.atleast_1d(samples)):
                at_floor = bool(floors and floors[variant][layer] and sample == 0)
                rows.append((variant, layer, sample, metric, float(value), at_floor))
    return pd.DataFrame(rows, columns=["variant", "layer", "sample", "metric", "value", "at_floor"])


def data_lines(ax):
    return [
        line for line in ax.get_lines() if line.get_label() and not line.get_label().startswith("_")
    ]


def test_fraction_writes_exact_small_fractions_and_leaves_other_numbers():
    assert [style.fraction(v) for v in (0.015625, 0.125, 0.5, 2.0, 0.1, 1e-7)] == [
        "1/64", "0.125", "0.5", "2", "0.1", "1e-07"
    ]  # fmt: skip
    assert style.fractions_in("d_QK = 0.015625 and 0.0078125") == "d_QK = 1/64 and 1/128"


def test_series_styles_differ_in_colour_line_style_and_marker_for_many_series():
    styles = [tuple(style.series_style(i).values()) for i in range(40)]
    assert len(set(styles)) == 40
    assert len({s[0] for s in styles[:8]}) == 8  # eight Okabe-Ito colours before any repeats


def test_more_than_six_series_become_small_multiples():
    df = frame({f"v{i}": [1.0, 0.5] for i in range(8)})
    shown = [ax for ax in plot.band_plot(df, logy=False).axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == [f"variant = v{i}" for i in range(8)]
    assert len(plot.band_plot(df.query("variant < 'v6'"), logy=False).axes) == 1


def test_a_layer_with_any_sample_at_the_floor_has_no_mean_and_a_labelled_floor_marker():
    # Layer 2: one of three samples at the floor, the others far above it.
    df = frame({"san": [[1.0, 1.0, 1.0], [0.1, 0.2, 0.3], [1e-16, 0.9, 0.8]]},
               floors={"san": [False, False, True]})  # fmt: skip
    fig = plot.band_plot(df, floor=torch.float32)
    ax = fig.axes[0]
    (mean,) = data_lines(ax)
    assert np.allclose(mean.get_ydata()[:2], [1.0, 0.2]) and math.isnan(mean.get_ydata()[2])
    floor_value = dtype_floor(torch.float32)
    markers = [line for line in ax.get_lines() if line.get_marker() == "v"]
    assert [list(m.get_ydata()) for m in markers] == [[floor_value]]
    assert [t.get_text() for t in ax.texts] == ["1/3"]
    above = [line for line in ax.get_lines() if line.get_marker() == "."]
    assert sorted(above[0].get_ydata()) == [0.8, 0.9]  # the samples above the floor, as dots
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "at the float32 floor; k/n: share of rows" in legend


def test_the_band_on_a_log_axis_spans_the_10th_to_90th_percentile_and_stays_positive():
    samples = [0.001, 0.01, 0.1, 1.0, 10.0]
    df = frame({"san": [samples, samples]})
    ax = plot.band_plot(df).axes[0]
    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    low, high = np.quantile(samples, [0.1, 0.9])
    assert np.isclose(ys.min(), low) and np.isclose(ys.max(), high) and ys.min() > 0


def test_log_axes_label_whole_decades_only_and_integer_axes_integers():
    df = frame({"san": [1.0, 0.3, 0.02, 0.004]})
    ax = plot.band_plot(df).axes[0]
    ax.figure.canvas.draw()
    low, high = ax.get_ylim()
    decades = [t for t in ax.yaxis.get_majorticklocs() if low <= t <= high]
    assert decades and all(np.isclose(np.log10(t), round(np.log10(t))) for t in decades)
    assert all(t.get_text() == "" for t in ax.yaxis.get_minorticklabels())
    assert all(float(t).is_integer() for t in ax.xaxis.get_majorticklocs())


def test_layers_draws_residuals_on_log_axes_and_cosines_on_linear_ones():
    df = pd.concat([frame({"san": [1.0, 1e-3]}, metric="res_comp_rel"),
                    frame({"san": [0.1, 0.99]}, metric="cos_mean")])  # fmt: skip
    fig = plot.layers(df)
    assert [ax.get_yscale() for ax in fig.axes] == ["log", "linear"]
    assert [ax.get_title() for ax in fig.axes][1] == "mean cosine of token pairs"


def test_layers_uses_every_varying_identifying_column_as_the_series():
    df = pd.concat([frame({"san": [1.0, 0.5], "skip": [1.0, 0.9]}).assign(model=m)
                    for m in ("minilm", "gpt2")])  # fmt: skip
    labels = [line.get_label() for line in data_lines(plot.layers(df).axes[0])]
    assert labels == ["minilm / san", "minilm / skip", "gpt2 / san", "gpt2 / skip"]


def test_layers_names_a_metric_the_frame_lacks_and_the_ones_it_has():
    with pytest.raises(InputError, match=r"\['mu'\] are not in the frame; it has \['mu_rel'\]"):
        plot.layers(frame({"san": [1.0, 0.5]}), metric="mu")


@pytest.mark.parametrize(
    ("draw", "rows", "message"),
    [
        (plot.layers, {"layer": [], "metric": [], "value": []}, "the frame has no rows; pass the tidy frame"),
        (plot.layers, {"layer": [0], "metric": ["mu_rel"], "value": ["a"]},
         "column 'value' holds .* values, not numbers; convert it"),
        (plot.band_plot, {"layer": [0], "value": [1.0]}, r"no column\(s\) \['variant'\]"),
        (plot.band_plot, {"layer": [0], "value": [True], "variant": ["san"]},
         "column 'value' holds bool values"),
    ],
)  # fmt: skip
def test_a_frame_that_cannot_be_drawn_is_refused_in_a_sentence(draw, rows, message):
    with pytest.raises(InputError, match=message):
        draw(pd.DataFrame(rows))
    # the same frame with numbers in each row draws
    good = {"layer": [0, 1], "metric": ["mu_rel"] * 2, "value": [1.0, 0.5], "variant": ["san"] * 2}
    assert draw(pd.DataFrame(good)).axes


def test_layers_refuses_a_series_column_the_frame_lacks_and_a_width_that_is_no_size():
    good = frame({"san": [1.0, 0.5]})
    with pytest.raises(
        InputError,
        match=r"no column\(s\) \['nope'\] .*pass by= columns it has, or None for the ones that vary of run, model",
    ):
        plot.layers(good, by="nope")
    for width in (-1, float("nan"), "7"):
        with pytest.raises(InputError, match="pass a width in inches"):
            plot.layers(good, width=width)
    assert plot.layers(good, by="variant", width=5).get_size_inches()[0] == 5


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (np.zeros(3), r"non-empty 2-D matrix \(rows x columns\); got shape \(3,\)"),
        (np.zeros((0, 3)), r"got shape \(0, 3\)"),
        (np.array([["a", "b"]]), "takes a matrix of numbers; this one holds others"),
    ],
)
def test_heatmap_refuses_what_is_no_matrix_of_numbers_and_draws_one(matrix, message):
    with pytest.raises(InputError, match=message):  # unpacking errors from inside, before
        plot.heatmap(matrix)
    assert len(plot.heatmap(np.eye(2)).axes) == 2


def test_singular_spectra_names_the_columns_it_reads():
    with pytest.raises(InputError, match=r"no column\(s\) \['index'\].*as wu2024-geometry writes"):
        plot.singular_spectra(frame({"san": [1.0, 0.5]}).assign(model="m", init="random"))


def test_render_gives_a_200_dpi_png_and_an_svg_the_same_bytes_every_time():
    fig = plot.layers(frame({"san": [1.0, 0.5]}))
    first, second = plot.render(fig), plot.render(fig)
    assert first == second
    png = first["png"]
    assert int.from_bytes(png[16:20], "big") == round(fig.get_size_inches()[0] * style.DPI)
    assert b"<svg" in first["svg"][:2000]


@pytest.mark.parametrize("transparent", [False, True])
def test_the_png_holds_the_pixels_matplotlib_draws_rgb_when_opaque(transparent):
    from PIL import Image

    fig = plot.layers(frame({"san": [1.0, 0.5, 0.2], "skip": [1.0, 0.9, 0.8]}))
    if transparent:
        fig.patch.set_alpha(0.0)
    png = Image.open(io.BytesIO(plot.render(fig, ("png",))["png"]))
    reference = io.BytesIO()
    with style.context():
        fig.savefig(reference, format="png", dpi=style.DPI)  # matplotlib's own writer
    expected = np.asarray(Image.open(reference))
    assert png.mode == ("RGBA" if transparent else "RGB")
    assert png.info["dpi"] == pytest.approx((style.DPI, style.DPI), abs=1e-3)
    assert np.array_equal(np.asarray(png.convert("RGBA")), expected)
    assert (expected[..., 3] < 255).any() == transparent


def test_the_png_has_the_rows_agg_draws_where_inches_times_dpi_falls_just_short():
    from matplotlib.figure import Figure
    from PIL import Image

    fig = Figure(figsize=(7.0, 9.7))  # 9.7 * 200 = 1939.9999...: Agg draws 1940 rows
    fig.add_subplot().plot([0, 1])
    own = fig.canvas
    png = Image.open(io.BytesIO(plot.render(fig, ("png",))["png"]))
    assert png.size == (1400, 1940)
    assert fig.canvas is own  # a figure's own canvas (a window's, say) stays its own


def test_render_takes_one_format_by_name_and_names_one_it_does_not_draw():
    fig = plot.layers(frame({"san": [1.0, 0.5]}))
    assert plot.render(fig, "png") == plot.render(fig, ("png",))  # it read 'p', 'n', 'g'
    with pytest.raises(InputError, match=r"format\(s\) \['jpg'\] are not drawn here; pass some of"):
        plot.render(fig, ("png", "jpg"))  # a KeyError, before


def test_an_svg_rendered_alone_has_the_bytes_of_one_rendered_after_the_png():
    # the layout comes from the same Agg pass, so a process drawing only the SVG agrees
    both = plot.render(plot.layers(frame({"san": [1.0, 0.5, 0.2]})))
    alone = plot.render(plot.layers(frame({"san": [1.0, 0.5, 0.2]})), ("svg",))
    assert alone == {"svg": both["svg"]}


def test_figures_are_a_column_or_the_full_text_width():
    assert plot.layers(frame({"san": [1.0, 0.5]})).get_size_inches()[0] == style.COLUMN_WIDTH
    df = pd.concat([frame({"san": [1.0, 0.5]}, metric=m) for m in ("mu_rel", "cos_mean")])
    assert plot.layers(df).get_size_inches()[0] == style.FULL_WIDTH


def test_heatmap_colour_range_is_the_one_asked_for():
    fig = plot.heatmap(np.full((2, 3), 31.0), vmin=0, vmax=32)
    assert fig.axes[0].images[0].get_clim() == (0, 32)


def test_path_accuracy_figure_shows_the_k0_route_its_claims_compare_with():
    from rankcollapse.plot.paths import path_accuracy_figure

    paths = pd.DataFrame(
        [{"task": t, "n_paths": n, "length": k, "value": 0.5 + 0.05 * k}
         for t in ("sorting", "memorization") for n in (5, 20) for k in range(4)]
    )  # fmt: skip
    reference = pd.DataFrame(
        {"full model": [1.0, 0.9], "majority": [0.3, 0.5]}, index=["sorting", "memorization"]
    )
    figure = path_accuracy_figure(
        paths, reference, {"sorting": 0.5, "memorization": 0.5}, margin=0.02, title="t"
    )
    for ax in figure.axes[:2]:
        (k0,) = [line for line in ax.get_lines() if line.get_label().startswith("k = 0")]
        left, right = ax.get_xlim()
        assert left < k0.get_xdata()[0] < right and right > 3


def test_a_panel_whose_every_value_is_at_the_floor_renders_on_a_linear_axis():
    """Nothing is drawn as signal, so nothing can be log scaled: states of 1e-300 in float64
    (below tiny / eps) crashed `measure` when its figure was saved."""
    df = pd.DataFrame({"layer": [0, 1], "value": [1e-300, 1e-301], "variant": "san",
                       "at_floor": True})  # fmt: skip
    for fig in (plot.band_plot(df), plot.layers(df.assign(metric="mu"))):
        assert fig.axes[0].get_yscale() == "linear"
        assert plot.render(fig)["png"].startswith(b"\x89PNG")


def test_a_column_wide_figure_keeps_its_title_and_legend_inside():
    """wu2024-geometry's column-wide figures clipped a long title and a 3-column legend."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    models = ["minilm (pretrained)", "smollm2 (pretrained)", "bert-base (random)", "gpt2 (random)"]
    df = pd.DataFrame({"layer": [0, 1] * 4, "value": np.linspace(0.1, 0.8, 8),
                       "model": np.repeat(models, 2)})  # fmt: skip
    fig = plot.line_plot(
        df,
        x="layer",
        hue="model",
        title="mean |cosine| between tokens against layer (mean over samples)",
    )
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    inside = fig.bbox
    for artist in (fig._suptitle, fig.legends[0]):
        box = artist.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, artist


def test_a_wrapped_panel_title_never_breaks_a_formula():
    # a formula split over two lines is drawn as its raw TeX
    rows = pd.concat([frame({"san": [1.0, 0.5]}, metric=m) for m in ("res_comp_rel", "min_sv_rel")])
    fig = plot.layers(rows)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 2 and any("\n" in title for title in titles)
    assert all(line.count("$") % 2 == 0 for title in titles for line in title.splitlines())


def test_decades_are_labelled_in_unicode_superscripts_and_other_values_as_numbers():
    assert [style.decade(v) for v in (1e-12, 0.1, 1.0, 1e3, 0.5)] == [
        "10⁻¹²", "10⁻¹", "10⁰", "10³", "0.5"
    ]  # fmt: skip
    ax = plot.layers(frame({"san": [1.0, 1e-2, 1e-4]})).axes[0]
    formatter = ax.yaxis.get_major_formatter()
    assert [formatter(v) for v in ax.get_yticks() if v == 1e-2] == ["10⁻²"]


def test_a_prepared_figure_is_taken_once_and_draws_the_bytes_of_a_fresh_one():
    df = pd.concat([frame({"san": [1.0, 0.5, 0.2]}, metric=m) for m in ("mu_rel", "cos_mean")])
    fresh = plot.render(plot.layers(df, title="t"))
    plot.curves.prepare_layers(n_metrics=2, n_series=1)
    prepared = style._prepared[(2, None, 3, True, False)][0]
    drawn = plot.layers(df, title="t")
    assert drawn is prepared and not style._prepared  # taken, and only once
    assert plot.layers(df, title="t") is not prepared
    assert plot.render(drawn) == fresh


def test_titles_are_fixed_above_the_axes_unless_an_offset_text_may_push_them():
    plain = plot.layers(frame({"san": [1.0, 0.5, 0.2]}))
    assert plain.axes[0].title.get_position()[1] == 1.0 and not plain.axes[0]._autotitlepos
    # ranks near 4096 that differ in the fourth decimal: matplotlib writes an offset above
    # the y axis, so the title keeps its search for a place above it
    offset = plot.layers(frame({"san": [4096.0, 4096.0001, 4096.0002]}, metric="stable_rank"))
    ax = offset.axes[0]
    assert ax._autotitlepos
    plot.render(offset)
    assert ax.yaxis.offsetText.get_text()
    title, text = (t.get_window_extent() for t in (ax.title, ax.yaxis.offsetText))
    assert not title.overlaps(text)
