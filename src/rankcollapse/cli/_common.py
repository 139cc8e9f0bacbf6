"""What several subcommands share: per-layer metric tables, terminal summaries, output files."""

from __future__ import annotations

import argparse
import math
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


INT64 = (-(2**63), 2**63 - 1)  # what torch and numpy take as a size or a seed


def integer(text: str) -> int:
    """An integer flag's value: what torch takes (64 bits), else argparse's clear error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not INT64[0] <= value <= INT64[1]:
        raise argparse.ArgumentTypeError(f"{text} does not fit in 64 bits (at most {INT64[1]})")
    return value


def seed(text: str) -> int:
    """A seed: an integer from 0 to 2**63 - 1 (the range torch.manual_seed and numpy share)."""
    value = integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative; seeds are 0 to {INT64[1]}")
    return value


def finite(text: str) -> float:
    """A float flag's value: a finite number (inf and nan mean nothing for any option here)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text} is not a finite number")
    return value


def typed_numbers(parser: argparse.ArgumentParser) -> None:
    """Every `type=int` flag of `parser` and its subcommands becomes `integer` (`seed` for
    --seed), every `type=float` flag `finite`: one rule for every number typed at the prompt."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                typed_numbers(sub)
        elif action.type is int:
            action.type = seed if action.dest in ("seed", "net_seed") else integer
        elif action.type is float:
            action.type = finite


def check_sizes(**values: int | None) -> None:
    """Sizes given as flags (n_samples=..., n_tokens=...): at least 1, n_tokens at least 2;
    None is a flag left out."""
    from rankcollapse.errors import ConfigError

    for name, value in values.items():
        least = 2 if name == "n_tokens" else 1
        if value is not None and value < least:
            raise ConfigError(
                f"--{name.replace('_', '-')} is {value}; it must be at least {least}."
            )


def parse_metrics(value: str | None) -> list[str] | None:
    """Split a comma list and check every name against the registry before any work starts."""
    if value is None:
        return None
    from rankcollapse.metrics import get_metric

    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        from rankcollapse.errors import ConfigError

        raise ConfigError(
            f"--metrics {value!r} names no metric; pass names such as mu_rel,res_comp_rel."
        )
    for name in names:
        get_metric(name)
    return names


def save_figure(fig: object, stem: Path) -> None:
    """`stem`.png (200 dpi) and `stem`.svg in the house style, each written atomically."""
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import render

    for fmt, data in render(fig).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)
