"""`rankcollapse compare DIR1 DIR2 ...`: stored probe, simulate or run folders side by side.

Each DIR holds a results.csv with layer, metric and value columns (what `probe`, `simulate`
and `run` write). The curves of every folder go into one figure (`rankcollapse.plot.layers`:
a panel per metric; a series per folder and model, variant, ... named in words; more than six
series as small multiples) and one table of per-layer means ('<floor' where every sample is at
the dtype floor), written to a new folder per call (results/compare, compare-2, ...; or --out)
as compare.png, compare.svg and compare.csv.
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
        "--out",
        type=Path,
        default=None,
        help="output folder (default: a new folder results/compare[-N] per call)",
    )
    parser.set_defaults(func=run)


# Columns that say what a series is (beside the folder it comes from), in this order.
SERIES_COLUMNS = ("model", "init", "architecture", "variant", "arm", "mask", "task")


def load_runs(dirs: list[Path]):
    """The results of every folder in one frame, with a `series` column saying in words what
    each curve is: the folder (its experiment, or what simulate, measure or probe ran), then
    the model, variant, ... where those differ between the curves of one folder."""
    import pandas as pd

    from rankcollapse.errors import InputError
    from rankcollapse.report import read_results

    frames = []
    for folder in dirs:
        if not (folder / "results.csv").exists():
            raise InputError(
                f"{str(folder)!r} has no results.csv; pass folders written by `rankcollapse "
                "probe`, `simulate` or `run` (e.g. results/probe/minilm)."
            )
        frame = read_results(folder / "results.csv", ("layer", "metric", "value"))
        frames.append(frame.assign(_folder=str(folder)))
    frame = pd.concat(frames, ignore_index=True)
    words = _folder_words(dirs)
    by_folder = frame.groupby("_folder", sort=False)
    varying = [c for c in SERIES_COLUMNS if c in frame and by_folder[c].nunique().max() > 1]
    if {"model", "variant"} & set(varying):  # probe's arm is its model and variant again
        varying = [c for c in varying if c != "arm"]
    parts = [frame["_folder"].map(words)]
    parts += [frame[c].astype(object).where(frame[c].notna(), None) for c in varying]
    series = [
        " · ".join(str(p) for p in values if p not in (None, ""))
        for values in zip(*(list(part) for part in parts), strict=True)
    ]
    return frame.assign(series=series).drop(columns="_folder")


def _folder_words(dirs: list[Path]) -> dict[str, str]:
    """Per folder, what it holds in words: its experiment (a run), the label its command
    stored (simulate: the toy network's settings), less what every folder shares; a folder
    with nothing to tell it apart is named by its path."""
    from rankcollapse.files import read_marker
    from rankcollapse.report import DamagedFileError, read_manifest

    described = {}
    for folder in dirs:
        marker = read_marker(folder) or {}
        try:
            experiment = (
                read_manifest(folder)["experiment"]
                if marker.get("command") in (None, "run")
                else None
            )
        except DamagedFileError:
            experiment = None
        label = experiment or marker.get("label") or ""
        # a simulate folder's "variants san/san+skip": each of its curves names its variant
        parts = str(label).split(", ")
        described[str(folder)] = [p for p in parts if p and not p.startswith("variants ")]
    shared = set.intersection(*(set(parts) for parts in described.values()))
    words = {
        k: ", ".join([p for p in parts if p not in shared] or parts[:1])
        for k, parts in described.items()
    }
    if len(set(words.values())) < len(words):  # the same words for two folders: their paths
        words = {k: _short(Path(k), dirs) for k in words}
    return words


def _short(folder: Path, dirs: list[Path]) -> str:
    """The folder's name, or its last two parts when two folders share a name."""
    names = [d.resolve().name for d in dirs]
    name = folder.resolve().name
    return name if names.count(name) == 1 else "/".join(folder.resolve().parts[-2:])


WIDE_PANEL = 5.0  # in: one panel of compare, wide enough for its legend beneath in columns


def compare_title(frame, dirs: list[Path]) -> str:
    """What the figure compares, in words: each folder as `load_runs` names it (the panels
    name the metrics).

    Example:
        >>> import pandas as pd
        >>> compare_title(pd.DataFrame({"series": ["a", "b", "c"]}), [Path("x"), Path("y")])
        '3 curves compared per layer: x | y'
    """
    names = " | ".join(dict.fromkeys(_folder_words(dirs).values()))
    return f"{frame['series'].nunique()} curves compared per layer: {names}"


def run(args: argparse.Namespace) -> int:
    from rich.text import Text

    from rankcollapse.cli._common import print_fitted, save_figure, summary_cells
    from rankcollapse.cli._console import console
    from rankcollapse.cli._output import output_folder
    from rankcollapse.errors import InputError
    from rankcollapse.files import write_atomic
    from rankcollapse.plot import layers, ordered_values

    output = output_folder(
        args.out,
        Path("results/compare"),
        "compare",
        fresh=True,
        label=", ".join(map(str, args.dirs)),
    )
    frame = load_runs(args.dirs)
    known = ordered_values(frame["metric"])
    if args.metrics == "all":
        metrics = known
    else:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
        missing = [m for m in metrics if m not in known]
        if missing or not metrics:
            raise InputError(
                f"metric(s) {missing or args.metrics!r} are in none of the folders; they hold "
                f"{known}. Pass --metrics with some of those, or 'all'."
            )
    frame = frame[frame["metric"].isin(metrics)]
    fig = layers(
        frame,
        metric=metrics,
        by="series",
        title=compare_title(frame, args.dirs),
        width=None if len(metrics) > 1 else WIDE_PANEL,
    )
    keys = ["metric", "layer"]
    table = frame.pivot_table(
        index=keys, columns="series", values="value", aggfunc="mean", sort=False
    )
    out = output.claim()
    save_figure(fig, out / "compare")
    write_atomic(out / "compare.csv", table.reset_index().to_csv(index=False).encode())
    index, columns = summary_cells(frame, keys, "series")
    rows = [[str(metric), str(layer)] for metric, layer in index]
    print_fitted("mean per layer", keys, rows, columns)
    console.print(Text(f"wrote {out / 'compare.png'} (+ .svg) and {out / 'compare.csv'}"))
    return 0
