"""`rankcollapse paths`: path counts, exact per-length decompositions and attention products.

    rankcollapse paths count   [--n-layers L --n-heads H | --arch NAME_OR_DIR ...] [--no-skip]
    rankcollapse paths decompose (toy options | --model NAME [--init random])
    rankcollapse paths products  (toy options | --model NAME [--init random]) [--n-paths 20]

Each writes a CSV (tidy rows) and a figure to --out and prints a summary table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.text import Text

from rankcollapse.cli._common import (
    HelpFormatter,
    add_device_options,
    add_renamed_option,
    add_sequence_options,
    check_sizes,
)
from rankcollapse.cli._console import console
from rankcollapse.files import write_atomic


def _add_network_options(parser: argparse.ArgumentParser) -> None:
    toy = parser.add_argument_group("toy network (used unless --model is given)")
    add_renamed_option(
        toy,
        "--n-layers",
        "--layers",
        metavar="N",
        dest="layers",
        type=int,
        default=6,
        help="layers",
    )
    add_renamed_option(
        toy,
        "--n-heads",
        "--heads",
        metavar="N",
        dest="heads",
        type=int,
        default=2,
        help="heads per layer",
    )
    add_renamed_option(
        toy, "--d-model", "--width", metavar="N", dest="width", type=int, default=32, help="d_model"
    )
    toy.add_argument("--skip", choices=["off", "on"], default="on", help="attention skip")
    toy.add_argument("--norm", choices=["none", "pre", "post"], default="none", help="norm")
    toy.add_argument("--mlp", action="store_true", help="add an MLP block after each layer")
    real = parser.add_argument_group("real model")
    real.add_argument(
        "--model",
        default=None,
        help="a model name of the registry or a local model directory (every family of "
        "`rankcollapse variants` decomposes)",
    )
    real.add_argument("--init", choices=["pretrained", "random"], default="pretrained")
    add_device_options(real, float64=True)
    add_sequence_options(parser, n_tokens=16, n_samples=4)
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, inputs, paths")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "paths",
        description="Paths through attention networks (Dong et al. 2021, Sec. 3).",
    )
    commands = parser.add_subparsers(dest="paths_command", metavar="ACTION", required=True)

    count = commands.add_parser(
        "count",
        help="number and share of paths of each length",
        description="Number (exact integers) and share of the paths of every length k = 0..L "
        "(Dong et al. 2021, Sec. 3), one table per architecture.",
        formatter_class=HelpFormatter,
    )
    add_renamed_option(
        count,
        "--n-layers",
        "--layers",
        metavar="N",
        dest="layers",
        type=int,
        default=None,
        help="L (with --n-heads)",
    )
    add_renamed_option(
        count,
        "--n-heads",
        "--heads",
        metavar="N",
        dest="heads",
        type=int,
        default=None,
        help="H (with --n-layers)",
    )
    count.add_argument(
        "--arch",
        nargs="*",
        default=None,
        help="names of the model registry or local model directories "
        "(default: distilbert bert-base bert-large gpt2 llama-small)",
    )
    count.add_argument("--no-skip", action="store_true", help="count without skip connections")
    count.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/paths-count, or -2, -3, ... for another config)",
    )
    count.set_defaults(func=run_count)

    decompose = commands.add_parser(
        "decompose",
        help="exact total of the paths of each length: norms, shares, collapse",
        formatter_class=HelpFormatter,
    )
    _add_network_options(decompose)
    decompose.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/paths-decompose, or -2, -3, ... for another config)",
    )
    decompose.set_defaults(func=run_decompose)

    products = commands.add_parser(
        "products",
        help="distance of attention products along sampled paths to rank 1",
        formatter_class=HelpFormatter,
    )
    _add_network_options(products)
    products.add_argument("--n-paths", type=int, default=20, help="paths per length")
    products.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/paths-products, or -2, -3, ... for another config)",
    )
    products.set_defaults(func=run_products)


def run_count(args: argparse.Namespace) -> int:
    import pandas as pd
    from rich.table import Table

    from rankcollapse.cli._common import save_figure
    from rankcollapse.errors import ConfigError
    from rankcollapse.paths import REFERENCE_ARCHITECTURES, architecture_paths, count_paths
    from rankcollapse.plot import line_plot

    if (args.layers is None) != (args.heads is None):
        raise ConfigError(
            "give both --n-layers and --n-heads (or neither, to count architectures)."
        )
    check_sizes(n_layers=args.layers, n_heads=args.heads)
    output = _output(args, "paths-count")
    skip = not args.no_skip
    frames = []
    if args.layers is not None:
        df = count_paths(args.layers, args.heads, skip=skip)
        df.insert(0, "n_heads", args.heads)
        df.insert(0, "n_layers", args.layers)
        df.insert(0, "architecture", f"L={args.layers}, H={args.heads}")
        frames.append(df)
    if args.arch is not None or args.layers is None:
        frames += [
            architecture_paths(a, skip=skip) for a in (args.arch or list(REFERENCE_ARCHITECTURES))
        ]
    df = pd.concat(frames, ignore_index=True)
    for name, rows in df.groupby("architecture", sort=False):
        n_layers, n_heads = int(rows["n_layers"].iloc[0]), int(rows["n_heads"].iloc[0])
        table = Table(
            title=Text(f"{name}: paths of each length, L={n_layers}, H={n_heads}")
            + ("" if skip else " (no skips)")
        )
        for column in ("length", "n_paths", "share"):
            table.add_column(column, justify="right")
        for row in rows.itertuples():  # every length, exact integer counts
            table.add_row(str(row.length), f"{row.n_paths:,}", f"{row.share:.4g}")
        console.print(table)
    out = output.claim()
    write_atomic(out / "paths.csv", df.to_csv(index=False).encode())
    figure = line_plot(
        df.assign(value=df["share"]),
        x="length",
        hue="architecture",
        title="Share of paths of each length",
        ylabel="share of paths",
    )
    save_figure(figure, out / "paths")
    console.print(Text(f"wrote {out / 'paths.csv'} and {out / 'paths.png'}"))
    return 0


def _checked(args: argparse.Namespace):
    """Sizes, memory and a real model's device and dtype, parsed and checked once, before the
    output folder is claimed: (device, dtype), None for the toy network."""
    if args.model is None:
        _check_memory(args)
    check_sizes(
        n_layers=args.layers,
        n_heads=args.heads,
        d_model=args.width,
        n_samples=args.samples,
        n_tokens=args.tokens,
    )
    if args.model is None:
        return None
    from rankcollapse.devices import resolve_device, resolve_dtype

    return resolve_device(args.device), resolve_dtype(args.dtype, float64=True)


def _frozen(args: argparse.Namespace, where):
    """The network frozen at its input, and a label for titles (`where`: `_checked`'s)."""
    if args.model is not None:
        from rankcollapse.measure import ModelSource, ProbeInputs
        from rankcollapse.paths import freeze_real

        loaded = ModelSource(args.model, args.init, args.seed, *where).load()
        inputs = ProbeInputs(
            random_tokens=not loaded.has_tokenizer,
            n_samples=args.samples,
            n_tokens=args.tokens,
            seed=args.seed,
        )
        ids, token_mask = inputs.build(loaded)
        return freeze_real(loaded, ids, token_mask), f"{args.model} ({args.init})"
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens
    from rankcollapse.paths import freeze_toy
    from rankcollapse.seeds import stream_seed

    config = NetConfig(
        n_layers=args.layers,
        n_heads=args.heads,
        d_model=args.width,
        skip=args.skip,
        norm=args.norm,
        mlp=args.mlp,
        seed=args.seed,
    )
    x = random_tokens(args.samples, args.tokens, args.width, seed=stream_seed(args.seed, "data"))
    label = f"toy L={args.layers} H={args.heads} skip={args.skip} norm={args.norm} mlp={args.mlp}"
    return freeze_toy(ToyNet(config), x), label


def _check_memory(args: argparse.Namespace) -> None:
    """Refuse a toy network whose frozen forward pass (states, every layer's attention) and
    per-length components, (L + 1) x states in float64 three times over, would not fit in
    memory; before the bounds, and before anything is allocated."""
    from rankcollapse.sizes import check_memory, measure_bytes, toy_bytes

    sizes = {"n_layers": args.layers, "n_heads": args.heads, "d_model": args.width}
    sizes |= {"n_samples": args.samples, "n_tokens": args.tokens}
    d_mlp = 4 * args.width if args.mlp else 0
    needed = toy_bytes(**sizes, d_mlp=d_mlp, keep_attention=True)
    needed += 3 * 8 * (args.layers + 1) * args.samples * args.tokens * args.width
    needed += measure_bytes(args.samples, args.tokens, args.width)
    check_memory(
        f"paths {args.paths_command}",
        needed,
        sizes,
        "lower --n-layers, --n-heads, --n-samples, --n-tokens or --d-model",
    )


def run_decompose(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._common import save_figure
    from rankcollapse.paths import decompose_by_length, length_frame
    from rankcollapse.plot import band_plot

    where = _checked(args)
    output = _output(args, "paths-decompose")
    frozen, label = _frozen(args, where)
    result = decompose_by_length(frozen)
    error = float((result.output - frozen.reference).abs().max() / frozen.reference.abs().max())
    df = length_frame(result)
    means = df.pivot_table(index="length", columns="metric", values="value", aggfunc="mean")
    table = Table(title=Text(f"per-length components of {label} (length -1: bias term)"))
    table.add_column("length", justify="right")
    for name in means.columns:
        table.add_column(name, justify="right")
    for length, row in means.iterrows():
        table.add_row(str(length), *(f"{v:.3g}" for v in row))
    console.print(table)
    console.print(f"sum of components + bias vs real output: max relative error {error:.2g}")
    out = output.claim()
    write_atomic(out / "components.csv", df.to_csv(index=False).encode())
    shown = df[(df["length"] >= 0) & df["metric"].isin(["norm_ratio", "res_comp_rel"])]
    figure = band_plot(
        shown,
        x="length",
        hue=None,
        panel="metric",
        logy=True,
        title=f"Path components by length: {label}",
    )
    save_figure(figure, out / "components")
    console.print(Text(f"wrote {out / 'components.csv'} and {out / 'components.png'}"))
    return 0


def run_products(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._common import save_figure
    from rankcollapse.paths import products_frame
    from rankcollapse.plot import products_figure

    check_sizes(n_paths=args.n_paths)
    where = _checked(args)
    output = _output(args, "paths-products")
    frozen, label = _frozen(args, where)
    df = products_frame(frozen.attention(), n_paths=args.n_paths, seed=args.seed)
    medians = df.groupby("length")["value"].median()
    table = Table(title=Text(f"median ||P_path - rank-1|| / ||P_path|| by path length: {label}"))
    table.add_column("length", justify="right")
    table.add_column("median rank1_dist", justify="right")
    for length, value in medians.items():
        table.add_row(str(length), f"{value:.3g}")
    console.print(table)
    out = output.claim()
    write_atomic(out / "products.csv", df.to_csv(index=False).encode())
    save_figure(products_figure(df.assign(model=label)), out / "products")
    console.print(Text(f"wrote {out / 'products.csv'} and {out / 'products.png'}"))
    return 0


def _output(args: argparse.Namespace, command: str):
    """--out, else results/COMMAND (or -2, -3, ... per config), by the one output rule, checked
    before any work; the config is every option that decides the numbers."""
    from rankcollapse.cli._output import output_folder
    from rankcollapse.files import digest

    options = {k: str(v) for k, v in sorted(vars(args).items()) if k not in ("func", "out")}
    return output_folder(args.out, Path("results") / command, command, config=digest(options)[:10])
