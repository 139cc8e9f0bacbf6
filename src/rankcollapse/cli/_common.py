"""What several subcommands share: the help formatter, options (device, metrics, sizes),
per-layer metric tables, terminal summaries and files (output folders: `cli._output`)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from rankcollapse.cli._figures import FigureProcesses
    from rankcollapse.cli._output import Output


def print_layer_means(df: pd.DataFrame, title: str, keys: tuple[str, ...] = ("layer",)) -> None:
    """Tables of the mean over samples of every metric: a row per `keys` (model, variant,
    layer), a column per metric, split so each fits the terminal (`print_fitted`); cells as
    `summary_cells` writes them. Keys with one value are left to the title.
    """
    shown = [k for k in keys if k == keys[-1] or df[k].nunique() > 1]
    rows, columns = summary_cells(df, shown, "metric")
    print_fitted(title, shown, [[str(v) for v in row] for row in rows], columns)


def summary_cells(
    df: pd.DataFrame, rows: list[str], column: str
) -> tuple[list[tuple], dict[str, list[str]]]:
    """The cells of a table of means over samples: a row per value of `rows`, a column per
    value of `column` (both in first-seen order), each cell the `metrics.floor_cell` of its
    group's `metrics.summarize_samples` row, so a table says what the figure of the same rows
    says.

    Example:
        >>> import pandas as pd
        >>> df = pd.DataFrame({"layer": 2, "metric": "min_sv_rel", "sample": [0, 1, 2, 3],
        ...                    "value": [3e-6, 1e-9, 1e-9, 1e-9], "at_floor": [0, 1, 1, 1]})
        >>> summary_cells(df, ["layer"], "metric")
        ([(2,)], {'min_sv_rel': ['3e-06 (3/4 <floor)']})
    """
    from rankcollapse.metrics import floor_cell, summarize_samples

    flags = df.get("at_floor", False)
    parts = df.assign(at_floor=flags)[[*rows, column, "value", "at_floor"]]
    summary = summarize_samples(parts, quantiles=())
    keys = [tuple(k) for k in summary[rows].itertuples(index=False)]
    order = list(dict.fromkeys(keys))
    names = list(dict.fromkeys(summary[column]))
    table: dict[str, dict[tuple, str]] = {str(name): {} for name in names}
    for key, row in zip(keys, summary.itertuples(index=False), strict=True):
        text = floor_cell(row.mean_above_floor, row.n_at_floor, row.n_samples)
        table[str(getattr(row, column))][key] = text
    return order, {name: [part.get(key, "-") for key in order] for name, part in table.items()}


def print_fitted(
    title: str, key_names: list[str], key_rows: list[list[str]], columns: dict[str, list[str]]
) -> None:
    """`columns` as one or more rich tables that each fit the console's width (80 columns
    in a narrow terminal), every table repeating the key columns; no cell is cut short.
    Every text is printed as text, never read as markup."""
    from rich.table import Table
    from rich.text import Text

    from rankcollapse.cli._console import console

    def width(name: str, cells: list[str]) -> int:
        return max([len(name), *map(len, cells)]) + 3  # padding and border

    keys_width = 1 + sum(width(n, [r[i] for r in key_rows]) for i, n in enumerate(key_names))
    chunks: list[list[str]] = [[]]
    used = keys_width
    for name, cells in columns.items():
        if chunks[-1] and used + width(name, cells) > console.width:
            chunks.append([])
            used = keys_width
        chunks[-1].append(name)
        used += width(name, cells)
    for part, names in enumerate(chunks, start=1):
        more = f" ({part} of {len(chunks)})" if len(chunks) > 1 else ""
        table = Table(title=Text(title + more))
        for name in key_names:
            table.add_column(
                Text(name), justify="right" if name == "layer" else "left", overflow="fold"
            )
        for name in names:
            table.add_column(Text(name), justify="right", overflow="fold")
        for i, row in enumerate(key_rows):
            table.add_row(*map(Text, row), *(Text(columns[n][i]) for n in names))
        console.print(table)


def write_collapse_outputs(
    df: pd.DataFrame,
    output: Output,
    *,
    hue: str | None,
    title: str,
    floor: object = None,
    figures: FigureProcesses,
) -> None:
    """results.csv (long format), then, where `figures` is enabled, collapse.png + collapse.svg
    (`rankcollapse.plot.layers`: one panel per metric, log axes only for quantities that
    shrink to zero), each written atomically; the numbers are on disk before any drawing, and
    the figure by the end of the `figures` block (drawn while the command prints its table).

    `floor` is the dtype whose floor the at_floor column flags (e.g. torch.float32).
    """
    from rich.text import Text

    from rankcollapse.cli._console import console
    from rankcollapse.files import write_atomic

    out = output.claim()
    write_atomic(out / "results.csv", df.to_csv(index=False).encode())
    console.print(Text(f"wrote {out / 'results.csv'}"))
    if figures.enabled:  # written, and said so, by the end of the `figures` block
        from rankcollapse.plot.floor import floor_of

        figures.draw_layers(
            out / "results.csv", out / "collapse", by=hue, floor=floor_of(floor), title=title
        )


def add_figures_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-figures",
        dest="figures",
        action="store_false",
        help="draw no figures (collapse.png/.svg, a report's figures/): the numbers, tables "
        "and results.csv only, for scripted use",
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


DEVICE_METAVAR = "{auto,cpu,cuda,cuda:N,mps}"


def device_flag(text: str) -> str:
    """A --device value, checked by `rankcollapse.devices.device_name` (the one grammar of
    device names; whether it is visible is checked when the command starts)."""
    from rankcollapse.devices import device_name
    from rankcollapse.errors import ConfigError

    try:
        return device_name(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_device_options(parser: Any, *, float64: bool = False) -> None:
    """--device and --dtype, shared by probe, qk-rank and paths decompose (`float64`: offered
    and the default). The names are parsed once, by `rankcollapse.devices`, when a command
    runs."""
    from rankcollapse.devices import DTYPES

    parser.add_argument(
        "--device",
        type=device_flag,
        default="cpu",
        metavar=DEVICE_METAVAR,
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


def reject_unknown(parser: argparse.ArgumentParser, command: str | None, words: list[str]) -> None:
    """Exit as argparse does on words no option takes ("unrecognized arguments: ..."), under the
    usage of the command they were given to, naming for each mistyped flag the command's
    nearest shown flag (`errors.closest`, the rule of every "did you mean")."""
    from rankcollapse.errors import closest

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser = action.choices[command]
    shown = [
        flag
        for action in parser._actions
        if action.help != argparse.SUPPRESS
        for flag in action.option_strings
    ]
    hints = []
    for word in words:
        flag = word.split("=", 1)[0]
        near = closest(flag, shown) if flag.startswith("-") else None
        hints += [f"{near} for {flag}"] if near else []
    message = f"unrecognized arguments: {' '.join(words)}"
    parser.error(f"{message}; did you mean {', '.join(hints)}?" if hints else message)


def check_sizes(**values: int | None) -> None:
    """Sizes given as flags (n_samples=..., n_tokens=...), each within its one bound
    (`rankcollapse.sizes.SIZES`); None is a flag left out."""
    from rankcollapse.sizes import check_size

    for name, value in values.items():
        if value is not None:
            check_size(name, value, shown=f"--{name.replace('_', '-')}")


def comma_names(value: str, flag: str, kind: str, example: str) -> list[str]:
    """The names of the comma list `value` typed after `flag`: at least one, else an error
    giving `example` and the command that lists the `kind`s (`rankcollapse {kind}s`)."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        from rankcollapse.errors import ConfigError

        raise ConfigError(
            f"{flag} {value!r} names no {kind}; pass comma-separated names, e.g. "
            f"{flag} {example} (`rankcollapse {kind}s` lists them)."
        )
    return names


def parse_metrics(value: str | None) -> list[str] | None:
    """Split a comma list and check every name against the registry before any work starts."""
    if value is None:
        return None
    from rankcollapse.metrics import get_metric

    names = comma_names(value, "--metrics", "metric", "res_comp_rel,mu_rel")
    for name in names:
        get_metric(name)
    return names


def save_figure(fig: object, stem: Path) -> None:
    """`stem`.png (200 dpi) and `stem`.svg in the house style, each written atomically."""
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import render

    for fmt, data in render(fig).items():
        write_atomic(stem.with_name(f"{stem.name}.{fmt}"), data)


def print_failed_findings(summary: Any) -> None:
    """One line per claim that failed (finding, beyond or check), with its reason: what was measured, what was
    expected, and the finding's note; so a FAIL on screen never stands without a why (the
    last lines of `make demo`, say)."""
    from rich.text import Text

    from rankcollapse.cli._console import console
    from rankcollapse.report import format_value

    for claim in summary.claims:
        if claim.verdict != "FAIL":
            continue
        why = f"{claim.quantity} is {format_value(claim.measured)}, expected {claim.expected}"
        note = f" ({claim.note})" if claim.note else ""
        console.print(Text("FAIL ", style="bold red") + Text(f"{claim.id}: {why}{note}."))
