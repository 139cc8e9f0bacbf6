"""`rankcollapse paths`: path counts, exact per-length decompositions and attention products.

    rankcollapse paths count   [--n-layers L --n-heads H | --arch NAME_OR_DIR ...] [--no-skip]
    rankcollapse paths decompose (toy options | --model NAME [--init random])
    rankcollapse paths products  (toy options | --model NAME [--init random]) [--n-paths 20]

Each writes a CSV (tidy rows) and a figure to --out and prints a summary table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import add_renamed_option, add_sequence_options
from rankcollapse.cli._console import console
from rankcollapse.cli.probe import HelpFormatter


def _add_network_options(parser: argparse.ArgumentParser) -> None:
    toy = parser.add_argument_group("toy network (used unless --model is given)")
    add_renamed_option(toy, "--n-layers", "--layers", metavar="N", dest="layers", type=int,
                       default=6, help="layers")  # fmt: skip
    add_renamed_option(toy, "--n-heads", "--heads", metavar="N", dest="heads", type=int, default=2,
                       help="heads per layer")  # fmt: skip
    add_renamed_option(toy, "--d-model", "--width", metavar="N", dest="width", type=int,
                       default=32, help="d_model")  # fmt: skip
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
    real.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda", "mps"],
        default="cpu",
        help="where the model runs; auto = an accelerator when one is visible",
    )
    real.add_argument(
        "--dtype",
        choices=["float64", "float32", "bfloat16", "float16"],
        default="float64",
        help="parameter dtype of the model (float64: the decomposition exact to float64)",
    )
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
    add_renamed_option(count, "--n-layers", "--layers", metavar="N", dest="layers", type=int,
                       default=None, help="L (with --n-heads)")  # fmt: skip
    add_renamed_option(count, "--n-heads", "--heads", metavar="N", dest="heads", type=int,
                       default=None, help="H (with --n-layers)")  # fmt: skip
    count.add_argument(
        "--arch",
        nargs="*",
        default=None,
        help="names of the model registry or local model directories "
        "(default: distilbert bert-base bert-large gpt2 llama-small)",
    )
    count.add_argument("--no-skip", action="store_true", help="count without skip connections")
    count.add_argument(
        "--out", type=Path, default=Path("results/paths-count"), help="output folder"
    )
    count.set_defaults(func=run_count)

    decompose = commands.add_parser(
        "decompose",
        help="exact total of the paths of each length: norms, shares, collapse",
        formatter_class=HelpFormatter,
    )
    _add_network_options(decompose)
    decompose.add_argument(
        "--out", type=Path, default=Path("results/paths-decompose"), help="output folder"
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
        "--out", type=Path, default=Path("results/paths-products"), help="output folder"
    )
    products.set_defaults(func=run_products)


def _check_positive(**values: int) -> None:
    from rankcollapse.errors import ConfigError

    for name, value in values.items():
        if value is not None and value < 1:
            raise ConfigError(f"--{name.replace('_', '-')} is {value}; it must be at least 1.")


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
    _check_positive(layers=args.layers, heads=args.heads)
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
            title=f"{name}: paths of each length, L={n_layers}, H={n_heads}"
            + ("" if skip else " (no skips)")
        )
        for column in ("length", "n_paths", "share"):
            table.add_column(column, justify="right")
        for row in rows.itertuples():  # every length, exact integer counts
            table.add_row(str(row.length), f"{row.n_paths:,}", f"{row.share:.4g}")
        console.print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "paths.csv", index=False)
    figure = line_plot(
        df.assign(value=df["share"]),
        x="length",
        hue="architecture",
        title="Share of paths of each length",
        ylabel="share of paths",
    )
    save_figure(figure, args.out / "paths")
    console.print(f"wrote [bold]{args.out / 'paths.csv'}[/] and [bold]{args.out / 'paths.png'}[/]")
    return 0


def _frozen(args: argparse.Namespace):
    """The network frozen at its input, and a label for titles."""
    _check_positive(layers=args.layers, heads=args.heads, width=args.width, samples=args.samples)
    if args.tokens < 2:
        from rankcollapse.errors import ConfigError

        raise ConfigError(f"--n-tokens is {args.tokens}; it must be at least 2.")
    if args.model is not None:
        import torch

        from rankcollapse.hf import load_model
        from rankcollapse.paths import freeze_real

        dtype = getattr(torch, args.dtype)
        loaded = load_model(
            args.model, init=args.init, seed=args.seed, dtype=dtype, device=args.device
        )
        from rankcollapse.hf.probe import model_inputs

        ids, token_mask = model_inputs(
            loaded,
            random_tokens=not loaded.has_tokenizer,
            n_samples=args.samples,
            n_tokens=args.tokens,
            seed=args.seed,
        )
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


def run_decompose(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._common import save_figure
    from rankcollapse.paths import decompose_by_length, length_frame
    from rankcollapse.plot import band_plot

    frozen, label = _frozen(args)
    result = decompose_by_length(frozen)
    error = float((result.output - frozen.reference).abs().max() / frozen.reference.abs().max())
    df = length_frame(result)
    means = df.pivot_table(index="length", columns="metric", values="value", aggfunc="mean")
    table = Table(title=f"per-length components of {label} (length -1: bias term)")
    table.add_column("length", justify="right")
    for name in means.columns:
        table.add_column(name, justify="right")
    for length, row in means.iterrows():
        table.add_row(str(length), *(f"{v:.3g}" for v in row))
    console.print(table)
    console.print(f"sum of components + bias vs real output: max relative error {error:.2g}")
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "components.csv", index=False)
    shown = df[(df["length"] >= 0) & df["metric"].isin(["norm_ratio", "res_comp_rel"])]
    figure = band_plot(
        shown,
        x="length",
        hue=None,
        panel="metric",
        logy=True,
        title=f"Path components by length: {label}",
    )
    save_figure(figure, args.out / "components")
    console.print(
        f"wrote [bold]{args.out / 'components.csv'}[/] and [bold]{args.out / 'components.png'}[/]"
    )
    return 0


def run_products(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._common import save_figure
    from rankcollapse.paths import products_frame
    from rankcollapse.plot import products_figure

    _check_positive(n_paths=args.n_paths)
    frozen, label = _frozen(args)
    df = products_frame(frozen.attention(), n_paths=args.n_paths, seed=args.seed)
    medians = df.groupby("length")["value"].median()
    table = Table(title=f"median ||P_path - rank-1|| / ||P_path|| by path length: {label}")
    table.add_column("length", justify="right")
    table.add_column("median rank1_dist", justify="right")
    for length, value in medians.items():
        table.add_row(str(length), f"{value:.3g}")
    console.print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "products.csv", index=False)
    save_figure(products_figure(df.assign(model=label)), args.out / "products")
    console.print(
        f"wrote [bold]{args.out / 'products.csv'}[/] and [bold]{args.out / 'products.png'}[/]"
    )
    return 0
