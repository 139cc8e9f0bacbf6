"""`rankcollapse plot-training FILE [FILE ...]`: figures of a monitor's CSV log.

Each FILE is the CSV a `rankcollapse.measure.monitor.CsvLog` wrote during training (columns step,
layer, variant, sample, metric, value, at_floor). Writes the layer x step heat map
(training-heatmap-METRIC.png/.svg) and the per-layer curves over steps
(training-curves-METRIC.png/.svg) of one metric; several files are compared side by side, one
panel per file (per variant when one file holds several); NaN and Inf values are left out and
counted in a note. They go to --out, else to
results/plot-training/<first file's name> (or -2, -3, ... for other files); never beside the
logs, and never over a file the command did not write.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plot-training",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", type=Path, help="CSV logs written by a monitor")
    parser.add_argument(
        "--metric", default="res_comp_rel", help="the metric to draw (default: res_comp_rel)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/plot-training/<first file's name>[-N])",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd
    from rich.markup import escape
    from rich.table import Table

    from rankcollapse.cli._common import save_figure, summary_cells
    from rankcollapse.cli._console import console
    from rankcollapse.cli._output import output_folder
    from rankcollapse.errors import InputError
    from rankcollapse.files import digest
    from rankcollapse.measure.monitor import read_log
    from rankcollapse.metrics import get_metric
    from rankcollapse.plot import training_curves, training_heatmap
    from rankcollapse.plot.training import not_finite

    get_metric(args.metric)  # a name of the registry (it becomes part of the file names)
    logs = sorted(str(path.resolve()) for path in args.files)
    output = output_folder(
        args.out,
        Path("results/plot-training") / args.files[0].stem,
        "plot-training",
        config=digest(logs)[:10],
        label=", ".join(map(str, args.files)),
    )
    names = [path.stem for path in args.files]
    labels = names if len(set(names)) == len(names) else [str(path) for path in args.files]
    frames = [read_log(p).assign(run=label) for p, label in zip(args.files, labels, strict=True)]
    for path, part in zip(args.files, frames, strict=True):
        if part.empty:
            raise InputError(
                f"{str(path)!r} holds no rows of a monitor log; pass the CSV a monitor wrote "
                "(CsvLog(path)) after at least one measured step."
            )
    frame = pd.concat(frames, ignore_index=True)
    panel = "run" if len(args.files) > 1 else ("variant" if frame.variant.nunique() > 1 else None)
    if len(args.files) > 1 and frame.variant.nunique() > 1:
        frame["run"] = frame["run"] + " / " + frame["variant"]
    heatmap = training_heatmap(frame, metric=args.metric, panel=panel)
    curves = training_curves(frame, metric=args.metric, panel=panel)
    out = output.claim()
    stems = [out / f"training-{kind}-{args.metric}" for kind in ("heatmap", "curves")]
    save_figure(heatmap, stems[0])
    save_figure(curves, stems[1])
    table = Table(title=f"{args.metric}: mean over samples at the last layer")
    for column in ("log", "first step", "value", "last step", "value"):
        table.add_column(column, justify="right")
    key = panel or "run"
    for name, rows in frame[frame.metric == args.metric].groupby(key, sort=False):
        last = rows[rows.layer == rows.layer.max()].sort_values("step", kind="stable")
        steps, cells = summary_cells(last, ["step"], "metric")
        values = cells[args.metric]
        table.add_row(escape(str(name)), str(steps[0][0]), values[0], str(steps[-1][0]), values[-1])
    console.print(table)
    for path, part in zip(args.files, frames, strict=True):
        bad = not_finite(part, args.metric)
        if len(bad):
            first = bad.iloc[0]
            console.print(
                f"note: {len(bad)} of {int((part.metric == args.metric).sum())} {args.metric} "
                f"values of {escape(str(path))} are NaN or Inf (first: step {first.step}, layer "
                f"{first.layer}, sample {first['sample']}); the figures leave them out (white "
                "cells in the heat map).",
                highlight=False,
            )
    console.print(
        f"wrote {escape(str(stems[0]))}.png and {escape(str(stems[1]))}.png (+ .svg)",
        highlight=False,
    )
    return 0
