"""`rankcollapse measure FILE`: the collapse table for your own saved activations.

Write FILE from Python with `rankcollapse.measure.save_activations(path, states, mask)`.
Accepted files: `.npy`, `.pt` (loaded with `weights_only=True`), `.safetensors`. The states have
shape (layers, batch, n, d) or (batch, n, d); a `.pt`/`.safetensors` file may hold a dict with
keys `states` (or `hidden_states`) and `mask`. A token mask can also come from `--mask FILE`,
shape (batch, n), True (or 1) for real tokens.

Layers are read one at a time (a `.npy` by offset, a `.safetensors` by slice, a `.pt` memory-
mapped), so a file larger than memory is measured when one layer fits; a layer that does not
fit is refused, with its size and the memory it needs, before it is read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import (
    DEVICE_METAVAR,
    add_figures_option,
    add_metrics_option,
    device_flag,
    parse_metrics,
)
from rankcollapse.cli._figures import FigureProcesses


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file", type=Path, help="activations, shape (layers, batch, n, d) or (batch, n, d)"
    )
    parser.add_argument("--mask", type=Path, default=None, help="token mask file, shape (batch, n)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/measure/<file stem>, or -2, -3, ... for another "
        "file or metrics)",
    )
    parser.add_argument(
        "--device",
        type=device_flag,
        metavar=DEVICE_METAVAR,
        default="cpu",
        help="where the metrics run, one layer at a time (float64; mps measures on the cpu)",
    )
    add_metrics_option(parser)
    add_figures_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with FigureProcesses(args.figures) as figures:  # they load matplotlib while we work
        return _measure(args, figures)


def _measure(args: argparse.Namespace, figures: FigureProcesses) -> int:
    from rankcollapse.cli._common import print_layer_means, write_collapse_outputs
    from rankcollapse.cli._output import output_folder
    from rankcollapse.devices import metrics_device, resolve_device
    from rankcollapse.files import digest
    from rankcollapse.measure import measure_activations
    from rankcollapse.reading import read_activations, shown

    metrics = parse_metrics(args.metrics)
    device = metrics_device(resolve_device(args.device))
    acts = read_activations(args.file, args.mask)  # checked before any folder is claimed
    what = {"file": str(args.file.resolve()), "mask": str(args.mask), "metrics": metrics}
    out = output_folder(
        args.out,
        Path("results/measure") / args.file.stem,
        "measure",
        config=digest(what)[:10],
        label=shown(args.file.name),
    )
    df = measure_activations(acts, metrics=metrics, device=device)
    n_layers, n_samples = acts.shape[:2]
    title = (
        f"{shown(args.file.name)}: {n_layers} layers, {n_samples} sequences ({acts.states.dtype})"
    )
    # the numbers on disk first, then the table, printed while the figure is drawn
    write_collapse_outputs(df, out, hue=None, title=title, figures=figures)
    print_layer_means(df, title)
    return 0
