"""The one figure style of the project: sizes, fonts, palette, ticks and labels.

Sizes are those of a paper: a column is 3.4 in wide, the full text width 7 in. Reports show a
figure at its physical size (96 CSS px per inch), so a 9 pt font reads as 12 px there, and
the PNG (200 dpi) has about twice the pixels it is drawn with. Every series gets a colour of
the Okabe-Ito palette (distinguishable with any common colour-vision deficiency), a line
style and a marker, all cycling together, so no curve can hide another.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
import struct
import zlib
from collections.abc import Iterator
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib import rcsetup, ticker
from matplotlib.figure import Figure

from rankcollapse.frames import as_names
from rankcollapse.plot import FORMATS

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

COLUMN_WIDTH = 3.4  # in: one column of a two-column paper
FULL_WIDTH = 7.0  # in: the full text width
PANEL_HEIGHT = 2.3  # in: one row of panels
DPI = 200  # of every PNG
MAX_SERIES = 6  # more series than this in one axis become small multiples

# Okabe & Ito 2008, "Color universal design": black last, so it is used least.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
FLOOR_COLOR = "#777777"

RC: dict[RcKeyType, Any] = {
    "font.size": 8.5,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.5,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7.5,
    "legend.title_fontsize": 7.5,
    "figure.titlesize": 9,
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "legend.frameon": False,
    "axes.prop_cycle": rcsetup.cycler(
        color=list(PALETTE), linestyle=list(LINESTYLES) * 2, marker=list(MARKERS[:8])
    ),
    "image.cmap": "viridis",
    "mathtext.default": "regular",
    "svg.hashsalt": "rankcollapse",  # fixed ids: the same figure gives the same SVG bytes
    "svg.fonttype": "path",
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@contextlib.contextmanager
def context() -> Iterator[None]:
    """The style's matplotlib settings, for building (and saving) figures inside the block.

    Example:
        >>> with context():
        ...     matplotlib.rcParams["font.size"]
        8.5
    """
    with matplotlib.rc_context(RC):
        yield


def series_style(i: int) -> dict[str, Any]:
    """Colour, line style and marker of the i-th series; distinct for the first 40 series.

    Example:
        >>> series_style(1)
        {'color': '#D55E00', 'linestyle': '--', 'marker': 's'}
    """
    return {
        "color": PALETTE[i % len(PALETTE)],
        "linestyle": LINESTYLES[i % len(LINESTYLES)],
        "marker": MARKERS[i % len(MARKERS)],
    }


def new_figure(
    n_panels: int = 1,
    *,
    width: float | None = None,
    max_cols: int = 3,
    sharex: bool = True,
    sharey: bool = True,
) -> tuple[Figure, list]:
    """A figure of `n_panels` axes in rows of at most `max_cols`, column or full width.

    One panel is a column wide; more panels share the full width. Unused cells are hidden.
    The figure `prepare_figure` built for these arguments, if there is one.
    """
    if width is not None and not (isinstance(width, int | float) and 0 < width < math.inf):
        from rankcollapse.errors import InputError

        raise InputError(f"width is {width!r}; pass a width in inches (> 0), or None.")
    key = (n_panels, width, max_cols, sharex, sharey)
    if key in _prepared:
        return _prepared.pop(key)
    n_cols = max(1, min(n_panels, max_cols))
    n_rows = -(-n_panels // n_cols)
    width = width or (COLUMN_WIDTH if n_cols == 1 else FULL_WIDTH)
    height = PANEL_HEIGHT * n_rows + 0.5
    fig = Figure(figsize=(width, height), layout="constrained", dpi=DPI)
    grid = fig.subplots(n_rows, n_cols, squeeze=False, sharex=sharex, sharey=sharey)
    axes = list(grid.ravel())
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


_prepared: dict[tuple, tuple[Figure, list]] = {}  # new_figure's arguments -> its figure
PREPARED_TICKS = 10  # ticks made ahead per axis and kind (major, minor); more come as needed


def prepare_figure(
    n_panels: int = 1,
    *,
    width: float | None = None,
    max_cols: int = 3,
    sharex: bool = True,
    sharey: bool = True,
) -> None:
    """Build now the figure that the next `new_figure` call with these arguments returns,
    with its first ticks (each a few artists, most of an empty figure's cost): a process
    that draws once its numbers arrive builds it while they are computed. The figure drawn
    from it is the same, pixel for pixel, as one built when asked."""
    figure, axes = new_figure(
        n_panels, width=width, max_cols=max_cols, sharex=sharex, sharey=sharey
    )
    for ax in figure.axes:
        for axis in (ax.xaxis, ax.yaxis):
            axis.get_major_ticks(PREPARED_TICKS)
            axis.get_minor_ticks(PREPARED_TICKS)
    _prepared[(n_panels, width, max_cols, sharex, sharey)] = figure, axes


def log_axis(ax, which: str = "y") -> None:
    """Log scale with labels at whole decades only, the limits widened to whole decades.

    Minor ticks stay unlabelled, so labels never overlap ("2x10^0 3x10^0 ...").
    """
    axis = ax.yaxis if which == "y" else ax.xaxis
    (ax.set_yscale if which == "y" else ax.set_xscale)("log")
    low, high = ax.get_ylim() if which == "y" else ax.get_xlim()
    if low > 0 and high > 0:
        # whole decades, kept inside float64's range (states of 1e300 have norms near it)
        low_exp = max(math.floor(math.log10(low) + 1e-9), -307)
        high_exp = min(math.ceil(math.log10(high) - 1e-9), 308)
        if low_exp >= high_exp:
            low_exp, high_exp = min(low_exp - 1, 307), max(high_exp + 1, -306)
        low, high = 10.0**low_exp, 10.0**high_exp
        (ax.set_ylim if which == "y" else ax.set_xlim)(low, high)
    axis.set_major_locator(ticker.LogLocator(base=10, numticks=7))
    span = math.log10(high / low) if low > 0 and high > 0 else 99
    # Unlabelled minor ticks: at 2 and 5 x each decade when few decades show, else at each
    # decade (every tick is several artists: 2..9 x each decade made a figure 15 % slower).
    subs = (0.2, 0.5) if span <= 5 else (1.0,)
    axis.set_minor_locator(ticker.LogLocator(base=10, subs=subs, numticks=99))
    axis.set_minor_formatter(ticker.NullFormatter())
    axis.set_major_formatter(ticker.FuncFormatter(decade))


_SUPERSCRIPTS = str.maketrans(
    "-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
)


def decade(value: float, _position: object = None) -> str:
    """A log axis' tick label: a decade in Unicode superscripts, as plain text (the same
    label in mathtext, $10^{-3}$, is parsed again for every figure and format); any other
    value as `fraction` writes it.

    Example:
        >>> decade(1e-3), decade(1.0), decade(100.0), decade(0.5)
        ('10⁻³', '10⁰', '10²', '0.5')
    """
    exponent = round(math.log10(value)) if value > 0 else 0
    if value > 0 and math.isclose(value, 10.0**exponent, rel_tol=1e-9):
        return "10" + str(exponent).translate(_SUPERSCRIPTS)
    return fraction(value)


def integer_axis(ax, which: str = "x", values: Any = None, *, log: bool = False) -> None:
    """Integer ticks: on a log axis at the values themselves (e.g. heads 1, 2, 4, ..., 64),
    at most eight of them, evenly spaced on the log scale (layers 1..128: 1, 2, 4, ..., 128);
    on a linear axis at whole numbers chosen by matplotlib."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    distinct = sorted(set(np.asarray(values).tolist())) if values is not None else []
    if log and distinct:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        axis.set_minor_locator(ticker.NullLocator())
        shown = distinct if len(distinct) <= 8 else _log_spaced(distinct, 8)
        axis.set_major_locator(ticker.FixedLocator(shown))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:.0f}"))
    else:
        axis.set_major_locator(ticker.MaxNLocator(integer=True, nbins=7))


def _log_spaced(values: list[float], count: int) -> list[float]:
    """The distinct `values` nearest (on a log scale) to `count` points evenly spaced on a log
    scale from the smallest positive value to the largest.

    Example:
        >>> _log_spaced(list(range(1, 129)), 8)
        [1, 2, 4, 8, 16, 32, 64, 128]
    """
    positive = [v for v in values if v > 0]
    logs = np.log(np.asarray(positive, dtype=float))
    targets = np.linspace(logs.min(), logs.max(), count)
    nearest = np.abs(logs[:, None] - targets[None, :]).argmin(axis=0)
    return [positive[i] for i in sorted(set(nearest.tolist()))]


def is_integer_valued(values: Any) -> bool:
    """True when every value is a whole number (layer, heads, path length)."""
    array = np.asarray(values)
    if array.dtype.kind in "iub":
        return True
    if array.dtype.kind != "f" or array.size == 0:
        return False
    finite = array[np.isfinite(array)]
    return finite.size > 0 and bool(np.all(finite == np.round(finite)))


def fraction(value: float, *, max_denominator: int = 1024) -> str:
    """A number as people write it: 1/64 rather than 0.015625, 3 rather than 3.0.

    Example:
        >>> fraction(0.015625), fraction(3.0), fraction(0.3), fraction(1e-5)
        ('1/64', '3', '0.3', '1e-05')
    """
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == round(value):
        return f"{value:.0f}"
    exact = Fraction(value).limit_denominator(max_denominator)
    decimal = f"{value:g}"
    if float(exact) == value and exact.denominator > 4 and len(decimal) > 5:
        return f"{exact.numerator}/{exact.denominator}"
    return decimal


_DECIMAL = re.compile(r"(?<![\w.])\d*\.\d{4,}(?![\w.])")


def fractions_in(text: str) -> str:
    """Every long decimal in `text` that is an exact small fraction, written as the fraction.

    Example:
        >>> fractions_in("d_QK = 0.015625, T = 0.5")
        'd_QK = 1/64, T = 0.5'
    """
    return _DECIMAL.sub(lambda m: fraction(float(m.group())), text)


# Column names of tidy frames, in words.
WORDS = {
    "layer": "layer",
    "n_layers": "layers L",
    "n_heads": "heads H",
    "n_tokens": "tokens n",
    "n_samples": "samples",
    "d_model": "width d",
    "d_qk": "$d_{QK}$",
    "length": "path length",
    "relative_length": "path length / depth",
    "temperature": "temperature T",
    "step": "training step",
    "res_comp_rel": "relative residual $\\|X - 1m^\\top\\|_{1,\\infty} / \\|X\\|_{1,\\infty}$",
    "res_comp": "residual $\\|X - 1m^\\top\\|_{1,\\infty}$",
    "mu_rel": "relative residual $\\mu(X) / \\|X\\|_F$",
    "mu": "residual $\\mu(X)$",
    "rank1_rel": "rank-1 residual (relative)",
    "cos_mean": "mean cosine of token pairs",
    "abs_cos_mean": "mean |cosine| of token pairs",
    "stable_rank": "stable rank",
    "effective_rank": "effective rank",
    "numerical_rank": "numerical rank",
    "min_sv": "smallest singular value",
    "min_sv_rel": "$\\sigma_{min} / \\sigma_{max}$",
    "attn_entropy": "attention entropy",
    "attn_min_edge": "smallest attention weight",
    "attn_dist_uniform": "distance of attention to uniform",
}


def words(name: object) -> str:
    """A column or metric name in words (or rendered math); unknown names lose underscores.

    Example:
        >>> words("numerical_rank"), words("held_out")
        ('numerical rank', 'held out')
    """
    text = str(name)
    return WORDS.get(text, fractions_in(text.replace("_", " ")))


_METADATA = {"png": {"Software": None}, "svg": {"Date": None}}  # nothing that varies by run


def lay_out(fig: Figure) -> None:
    """Compute `fig`'s layout (constrained layout, with the Agg renderer at 200 dpi) once and
    keep it: every later draw, in any format, is at those positions.

    Saving a figure with a layout engine lays it out twice and draws it once without output
    first; laid out here, a format is one draw. A figure laid out already stays as it is.
    """
    engine = fig.get_layout_engine()
    if engine is None:
        return
    if not hasattr(fig.canvas, "get_renderer"):
        # an Agg canvas: its renderer measures the text for the layout and then draws the
        # PNG, so each text is measured (and each formula parsed) once
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(fig)
    with context():
        engine.execute(fig)
    # no engine at all (not "none", whose placeholder still costs savefig a draw); None
    # means the rc's engine unless those rc settings are off
    with matplotlib.rc_context(
        {"figure.autolayout": False, "figure.constrained_layout.use": False}
    ):
        fig.set_layout_engine(None)


def render(fig: Figure, formats: str | tuple[str, ...] = FORMATS) -> dict[str, bytes]:
    """The figure as {"png": 200-dpi PNG bytes, "svg": SVG bytes} (or the `formats` asked
    for, one or several); same figure, same bytes, whichever formats are rendered together,
    in whatever order, by one process or several (`lay_out` first, then one draw per format).

    No metadata that changes between runs (software version, date) enters a file.
    """
    asked = as_names(formats)
    unknown = [fmt for fmt in asked if fmt not in FORMATS]
    if unknown:
        from rankcollapse.errors import InputError

        raise InputError(f"format(s) {unknown} are not drawn here; pass some of {list(FORMATS)}.")
    lay_out(fig)
    out = {}
    with context():
        for fmt in asked:
            if fmt == "png":
                out[fmt] = _png(fig)
                continue
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=DPI, metadata=_METADATA[fmt])
            out[fmt] = buffer.getvalue()
    return out


def _png(fig: Figure) -> bytes:
    """The figure drawn by Agg at DPI (`savefig`'s pixels), written as a PNG: RGB when every
    pixel is opaque (RGBA otherwise), each row stored as its difference from the row above
    (filter 2, "Up"), deflated at zlib's default level, the DPI in a pHYs chunk.

    matplotlib's writer (Pillow) keeps RGBA and tries every filter on each row: for the probe's
    12-panel figure, after the same 90 ms draw, this writes in 35 ms what it writes in 65, in
    214 kB against 229 (the PNG specification, ISO/IEC 15948).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    own = fig.canvas
    canvas = own if isinstance(own, FigureCanvasAgg) else FigureCanvasAgg(fig)
    try:
        fig.savefig(io.BytesIO(), format="rgba", dpi=DPI)  # draws; the canvas keeps the pixels
        rgba = np.asarray(canvas.buffer_rgba())  # (height, width, 4), as Agg sized them
    finally:
        fig.set_canvas(own)  # a figure's own canvas (a window's, say) stays its own
    height, width = rgba.shape[:2]
    opaque = bool((rgba[..., 3] == 255).all())
    # contiguous rows first: the filter on a strided view of RGBA took 2.5 x as long
    rows = np.ascontiguousarray(rgba[..., :3] if opaque else rgba).reshape(height, -1)
    filtered = np.empty((height, 1 + rows.shape[1]), np.uint8)
    filtered[:, 0] = 2  # "Up"; the first row's row above counts as zeros
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])  # modulo 256, as the spec says
    per_metre = round(DPI / 0.0254)
    return b"".join((
        b"\x89PNG\r\n\x1a\n",
        _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2 if opaque else 6, 0, 0, 0)),
        _chunk(b"pHYs", struct.pack(">IIB", per_metre, per_metre, 1)),
        _chunk(b"IDAT", zlib.compress(filtered.data)),
        _chunk(b"IEND", b""),
    ))  # fmt: skip


def _chunk(kind: bytes, data: bytes) -> bytes:
    """One PNG chunk: length, type, data, CRC-32 of type and data."""
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
