"""What several subcommands share: per-layer metric tables, terminal summaries, output files."""

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
            name, dest=action.dest, type=kwargs.get("type"), default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )  # fmt: skip


def add_sequence_options(parser: Any, *, n_tokens: int, n_samples: int) -> None:
    """--n-tokens and --n-samples (dests `tokens`, `samples`; old names hidden)."""
    add_renamed_option(parser, "--n-tokens", "--tokens", metavar="N", dest="tokens", type=int,
                       default=n_tokens, help="tokens per sequence")  # fmt: skip
    add_renamed_option(parser, "--n-samples", "--samples", metavar="N", dest="samples", type=int,
                       default=n_samples, help="number of sequences")  # fmt: skip


def parse_metrics(value: str | None) -> list[str] | None:
    """Split a comma list and check every name against the registry before any work starts."""
    if value is None:
        return None
    from rankcollapse.metrics import get_metric

    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        from rankcollapse.errors import ConfigError

        raise ConfigError(f"--metrics {value!r} names no metric; pass names such as mu_rel,res_comp_rel.")
    for name in names:
        get_metric(name)
    return names


def save_figure(fig: object, stem: Path) -> None:
    """`stem`.png (200 dpi) and `stem`.svg in the house style, each written atomically."""
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import render

    for fmt, data in render(fig).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)
