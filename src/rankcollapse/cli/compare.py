"""`rankcollapse compare DIR1 DIR2 ...`: stored probe, simulate or run folders side by side.

Each DIR holds a results.csv with layer, metric and value columns (what `probe`, `simulate`
and `run` write). The curves of every folder go into one figure (`rankcollapse.plot.layers`,
one panel per metric, one series per folder) and one table of per-layer means, written to
--out as compare.png, compare.svg and compare.csv.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dirs", nargs="+", type=Path, help="folders holding a results.csv")
    parser.add_argument(
        "--metrics",
        default="res_comp_rel",
        help="comma list of metrics to compare, or 'all' (default: res_comp_rel)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("results/compare"), help="output folder "
        "(default: results/compare)"
    )  # fmt: skip
    parser.set_defaults(func=run)


def load_runs(dirs: list[Path]):
    """The results of every folder in one frame, with a `run` column naming its folder."""
    import pandas as pd

    from rankcollapse.errors import InputError
    from rankcollapse.report import read_results

    frames = []
    for folder in dirs:
        path = folder / "results.csv"
        if not path.is_file():
            raise InputError(
                f"{str(folder)!r} has no results.csv; pass folders written by `rankcollapse "
                "probe`, `simulate` or `run` (e.g. results/probe/minilm)."
            )
        frame = read_results(path)
        missing = {"layer", "metric", "value"} - set(frame.columns)
        if missing:
            raise InputError(
                f"{str(path)!r} has no column(s) {sorted(missing)}; compare needs per-layer "
                "results (layer, metric, value), as probe, simulate and per-layer runs write."
            )
        frames.append(frame.assign(run=_label(folder, dirs)))
    return pd.concat(frames, ignore_index=True)


def _label(folder: Path, dirs: list[Path]) -> str:
    """The folder's name, or its last two parts when two folders share a name."""
    names = [d.resolve().name for d in dirs]
    name = folder.resolve().name
    return name if names.count(name) == 1 else "/".join(folder.resolve().parts[-2:])


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._common import save_figure
    from rankcollapse.cli._console import console
    from rankcollapse.errors import InputError
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import layers, ordered_values

    frame = load_runs(args.dirs)
    known = ordered_values(frame["metric"])
    if args.metrics == "all":
        metrics = known
    else:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        missing = [m for m in metrics if m not in known]
        if missing:
            raise InputError(
                f"metric(s) {missing} are in none of the folders; they hold {known}. "
                "Pass --metrics with some of those, or 'all'."
            )
    frame = frame[frame["metric"].isin(metrics)]
    by = ["run"] + [c for c in ("variant",) if c in frame and frame[c].nunique() > 1]
    fig = layers(frame, metric=metrics, by=by, title=f"{len(args.dirs)} runs compared")
    table = frame.pivot_table(
        index=["metric", "layer"], columns=by, values="value", aggfunc="mean", sort=False
    )
    table.columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else c for c in table.columns]
    args.out.mkdir(parents=True, exist_ok=True)
    save_figure(fig, args.out / "compare")
    write_atomic(args.out / "compare.csv", table.reset_index().to_csv(index=False).encode())
    from rich.table import Table

    shown = Table(title="mean per layer")
    for column in ["metric", "layer", *table.columns]:
        shown.add_column(str(column), justify="right")
    for (metric, layer), values in table.iterrows():
        shown.add_row(metric, str(layer), *(f"{v:.3g}" for v in values))
    console.print(shown)
    console.print(f"wrote {args.out / 'compare.png'} (+ .svg) and {args.out / 'compare.csv'}",
                  highlight=False)  # fmt: skip
    return 0
