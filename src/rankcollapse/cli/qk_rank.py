"""`rankcollapse qk-rank MODEL`: per-layer, per-head query-key rank of a real model.

For every layer and query head, the numerical, stable and effective rank of W_Q,h^T W_K,h (the
d x d bilinear form of the attention scores, rank at most d_head; Amsel et al. 2024). MODEL is
a name of the model registry or a local Hugging Face model directory; nothing reaches a hub.
Layers and heads are numbered from 1 (layer l is block l, as in `probe`). Prints a layer x
metric table (mean over heads, with the smallest and largest head) and writes qk_ranks.csv and
one heat map per metric (layer x head, colours from 0 to d_head) to a new folder under
results/qk-rank/ (or to --out).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import HelpFormatter, add_device_options


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "qk-rank",
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("model", help="model name or local model directory")
    parser.add_argument("--init", choices=["pretrained", "random"], default="pretrained")
    parser.add_argument(
        "--rtol",
        type=float,
        default=None,
        help="numerical-rank threshold relative to the largest singular value "
        "(default: the floor of the weights' dtype)",
    )
    add_device_options(parser)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: a new folder results/qk-rank/<model>[-N])",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from rankcollapse.cli._common import save_figure
    from rankcollapse.cli._console import console
    from rankcollapse.cli._output import output_folder
    from rankcollapse.devices import resolve_device, resolve_dtype
    from rankcollapse.files import write_atomic
    from rankcollapse.hf import load_resolved
    from rankcollapse.hf.qk_rank import QK_METRICS, qk_ranks
    from rankcollapse.plot import heatmap

    device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)  # before the folder
    default = Path("results/qk-rank") / Path(args.model).name
    output = output_folder(args.out, default, "qk-rank", fresh=True)
    loaded = load_resolved(args.model, init=args.init, device=device, dtype=dtype)
    df = qk_ranks(loaded, rtol=args.rtol)
    quantized = loaded.info.get("quantized", "no")
    note = "" if quantized == "no" else f", weights {quantized}"
    d_head = int(df.d_head.iloc[0])
    table = Table(
        title=Text(
            f"{loaded.name} ({loaded.init}{note}): rank of W_Q,h^T W_K,h, "
            f"d_head={d_head} (mean over heads [min, max])"
        )
    )
    table.add_column("layer", justify="right")
    for metric in QK_METRICS:
        table.add_column(metric, justify="right")
    stats = df.groupby(["layer", "metric"]).value.agg(["mean", "min", "max"])
    for layer in sorted(df.layer.unique()):
        cells = [
            f"{stats.loc[(layer, m), 'mean']:.3g} [{stats.loc[(layer, m), 'min']:.3g}, "
            f"{stats.loc[(layer, m), 'max']:.3g}]"
            for m in QK_METRICS
        ]
        table.add_row(str(layer), *map(Text, cells))
    console.print(table)
    out = output.claim()
    write_atomic(out / "qk_ranks.csv", df.to_csv(index=False).encode())
    for metric in QK_METRICS:
        grid = df[df.metric == metric].pivot(index="layer", columns="head", values="value")
        fig = heatmap(
            grid.to_numpy(),
            xlabels=list(grid.columns),
            ylabels=list(grid.index),
            xlabel="head",
            ylabel="layer",
            cbar_label=metric,
            title=f"{loaded.name}: {metric} of W_Q^T W_K (d_head={d_head})",
        )
        fig.axes[0].images[0].set_clim(0, d_head)  # every map on [0, max rank]
        save_figure(fig, out / f"qk_{metric}")
    console.print(Text(f"wrote {out / 'qk_ranks.csv'} and heat maps qk_*.png (+ .svg)"))
    return 0
