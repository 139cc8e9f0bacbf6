"""What several subcommands share: the help formatter, options (device, metrics, sizes),
per-layer metric tables, terminal summaries, output folders and files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from rankcollapse.cli._console import console


def print_layer_means(df: pd.DataFrame, title: str) -> None:
    """A rich table: one row per layer, one column per metric (mean over samples).

    A mean whose samples all sit at the dtype floor is shown as '<floor'.
    """
    from rich.table import Table

    means = df.pivot_table(index="layer", columns="metric", values="value", aggfunc="mean")
    floors = df.pivot_table(index="layer", columns="metric", values="at_floor", aggfunc="all")
    metric_names = list(dict.fromkeys(df["metric"]))
    table = Table(title=title)
    table.add_column("layer", justify="right")
    for name in metric_names:
        table.add_column(name, justify="right")
    for layer in means.index:
        cells = [_cell(means.loc[layer, name], floors.loc[layer, name]) for name in metric_names]
        table.add_row(str(layer), *cells)
    console.print(table)


def _cell(mean: float, all_at_floor: object) -> str:
    """A table cell: '-' where a metric has no value at this layer (e.g. attention at layer 0)."""
    if pd.isna(mean):
        return "-"
    return "<floor" if all_at_floor is True or all_at_floor == 1 else f"{mean:.3g}"


def write_collapse_outputs(
    df: pd.DataFrame, out: Path, *, hue: str | None, title: str, floor: object = None
) -> None:
    """results.csv (long format) and collapse.png + collapse.svg (`rankcollapse.plot.layers`:
    one panel per metric, log axes only for quantities that shrink to zero), written atomically.

    `floor` is the dtype whose floor the at_floor column flags (e.g. torch.float32).
    """
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import layers

    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "results.csv", df.to_csv(index=False).encode())
    save_figure(layers(df, by=hue, floor=floor, title=title), out / "collapse")
    console.print(
        f"wrote [bold]{out / 'results.csv'}[/] and [bold]{out / 'collapse.png'}[/] (+ .svg)"
    )


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's line breaks and shows every option's default (unless its help
    already names it, or the option is a flag or has no default)."""

    def add_text(self, text) -> None:
        # A callable epilog is built only when help is shown (it may import the model registry).
        super().add_text(text() if callable(text) else text)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
        return text + " (default: %(default)s)" if shown and "default" not in text else text


def add_device_options(parser: Any, *, float64: bool = False) -> None:
    """--device and --dtype, shared by probe, qk-rank and paths decompose (`float64`: offered
    and the default). The names are parsed once, by `rankcollapse.devices`, when a command
    runs."""
    from rankcollapse.devices import DEVICES, DTYPES

    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the model runs; auto = an accelerator when one is visible, else cpu",
    )
    parser.add_argument(
        "--dtype",
        choices=["float64", *DTYPES] if float64 else list(DTYPES),
        default="float64" if float64 else "float32",
        help="parameter dtype of the model (float64: the decomposition exact to float64)"
        if float64
        else "parameter dtype of the model (metrics are float64 either way)",
    )


def fresh_folder(out: Path | None, default: Path) -> tuple[Path, str]:
    """(folder, message): --out as given (saying so when it overwrites), else a new folder."""
    if out is not None:
        exists = out.is_dir() and any(out.iterdir())
        return out, f"overwriting files in {out}" if exists else f"writing to {out}"
    folder, index = default, 1
    while folder.exists():
        index += 1
        folder = default.with_name(f"{default.name}-{index}")
    return folder, f"writing to a new folder {folder} (pass --out to choose one)"


def add_metrics_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics",
        default=None,
        help="comma-separated metric names (see `rankcollapse metrics`); default: all state metrics",
    )


def add_renamed_option(parser: Any, flag: str, *old: str, **kwargs: Any) -> None:
    """Add option `flag` (in the one vocabulary: --n-layers, --n-tokens, ...), and its names
    from before the vocabulary (`old`, e.g. --tokens) as hidden aliases for one release."""
    action = parser.add_argument(flag, **kwargs)
    for name in old:
        parser.add_argument(
            name,
            dest=action.dest,
            type=kwargs.get("type"),
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )


def add_sequence_options(parser: Any, *, n_tokens: int, n_samples: int) -> None:
    """--n-tokens and --n-samples (dests `tokens`, `samples`; old names hidden)."""
    add_renamed_option(
        parser,
        "--n-tokens",
        "--tokens",
        metavar="N",
        dest="tokens",
        type=int,
        default=n_tokens,
        help="tokens per sequence",
    )
    add_renamed_option(
        parser,
        "--n-samples",
        "--samples",
        metavar="N",
        dest="samples",
        type=int,
        default=n_samples,
        help="number of sequences",
    )


def parse_metrics(value: str | None) -> list[str] | None:
    """Split a comma list and check every name against the registry before any work starts."""
    if value is None:
        return None
    from rankcollapse.metrics import get_metric

    names = [name.strip() for name in value.split(",") if name.strip()]
    for name in names:
        get_metric(name)
    return names


def save_figure(fig: object, stem: Path) -> None:
    """`stem`.png (200 dpi) and `stem`.svg in the house style, each written atomically."""
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import render

    for fmt, data in render(fig).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)
