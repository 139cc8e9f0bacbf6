"""`rankcollapse probe MODEL [MODEL ...]`: per-layer collapse of real models' residual streams.

Each MODEL is a name of the model registry (`rankcollapse variants --models` lists them) or a
local Hugging Face model directory, with or without tokenizer files; nothing reaches a hub.
Several models are probed on the same inputs (the same text, windows seed, sample and token
counts; each model tokenizes the text with its own tokenizer) and shown in one table and one
figure. Writes results.csv (model, init, variant, mask, ..., layer, layer_kind, sample, metric,
value, at_floor) and collapse.png to a new folder under results/probe/ (or to --out).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import (
    HelpFormatter,
    add_device_options,
    add_figures_option,
    add_metrics_option,
    add_sequence_options,
    parse_metrics,
)
from rankcollapse.cli._figures import FigureProcesses


def models_epilog() -> str:
    """The model registry and the families, for --help (from the generated catalogue: no
    model code is imported)."""
    from rankcollapse.cli.catalog import read_catalog

    catalog = read_catalog()
    lines = ["named models (--init pretrained needs shipped weights; the rest are random-init):"]
    for name, spec in catalog["models"].items():
        kind = "pretrained" if spec["pretrained"] else "random"
        lines.append(
            f"  {name:<16} {spec['family']:<10} {spec['n_layers']:>2} layers, "
            f"{spec['n_heads']:>2} heads, {spec['d_model']:>4} wide, {kind}: {spec['description']}"
        )
    lines.append(
        "model directories of these families: " + ", ".join(catalog["families"]) + " (see "
        "`rankcollapse variants`)"
    )
    return "\n".join(lines)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe",
        description=__doc__,
        epilog=models_epilog,  # type: ignore[arg-type]  # HelpFormatter calls it, for help only
        formatter_class=HelpFormatter,
    )
    parser.add_argument("model", nargs="+", help="model names or local model directories")
    parser.add_argument("--init", choices=["pretrained", "random"], default="pretrained")
    parser.add_argument(
        "--variants",
        default="transformer",
        help="comma list of variants (see `rankcollapse variants`), e.g. "
        "san,san+mlp,san+skip,transformer or dong-authors:san",
    )
    parser.add_argument(
        "--mask",
        default=None,
        help="attention mask replacing the model's own in every layer: complete, causal, window:W, "
        "causal_window:W, sinks:S:W, ... (see rankcollapse.masks.MASK_FAMILIES); "
        "default: the model's own pattern",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="softmax temperature T: the model's logits are divided by T",
    )
    parser.add_argument("--train-mode", action="store_true", help="run with dropout on")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--text",
        type=Path,
        default=None,
        help="a UTF-8 text file (default: the built-in sample corpus)",
    )
    source.add_argument(
        "--random-tokens",
        action="store_true",
        help="random token ids instead of text (from the config's vocabulary without a tokenizer)",
    )
    source.add_argument(
        "--images",
        type=Path,
        default=None,
        help="a folder of PNG or JPEG files for a vision model (vit), up to --n-samples of them "
        "in file-name order (default for vision models: random pixels)",
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="a tokenizer directory, for a model directory saved without one",
    )
    parser.add_argument(
        "--padded",
        action="store_true",
        help="one paragraph per sample, padded (pads never enter metrics)",
    )
    add_sequence_options(parser, n_tokens=128, n_samples=32)
    add_metrics_option(parser)
    add_figures_option(parser)
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of random init, windows and random tokens"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="sequences per forward pass (default: about 2048 tokens per pass; all at once with --train-mode)",
    )
    add_device_options(parser)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: a new folder results/probe/<models>[-N])",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with FigureProcesses(args.figures) as figures:  # they load matplotlib while we load models
        return _probe(args, figures)


def _probe(args: argparse.Namespace, figures: FigureProcesses) -> int:
    import pandas as pd
    from rich.text import Text

    from rankcollapse.cli._common import (
        check_sizes,
        print_layer_means,
        write_collapse_outputs,
    )
    from rankcollapse.cli._console import PassProgress, err_console
    from rankcollapse.cli._output import output_folder
    from rankcollapse.devices import resolve_device, resolve_dtype
    from rankcollapse.measure import ModelSource, ProbeInputs, prepare_probe, resolve_probe

    _check_memory(args)
    check_sizes(n_samples=args.samples, n_tokens=args.tokens, batch_size=args.batch_size)
    # Every value is parsed once, here, before any model loads.
    request = resolve_probe(
        args.variants,
        args.mask,
        parse_metrics(args.metrics),
        temperature=args.temperature,
        train_mode=args.train_mode,
        batch_size=args.batch_size,
    )
    inputs = ProbeInputs(
        text=args.text,
        random_tokens=args.random_tokens,
        padded=args.padded,
        images=args.images,
        n_samples=args.samples,
        n_tokens=args.tokens,
        seed=args.seed,
    )
    inputs.check_fits(request)
    variants = [variant.name for variant in request.variants]
    # the figure's shape (a panel per metric, a series per model and variant), so the
    # figure process builds it while the models load
    figures.prepare_layers(n_metrics=len(request.metrics), n_series=len(args.model) * len(variants))
    device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)
    default = Path("results/probe") / "+".join(Path(m).name for m in args.model)
    out = output_folder(args.out, default, "probe", fresh=True, label=", ".join(args.model))
    frames, labels = [], []
    for k, name in enumerate(args.model, start=1):
        step = f"[{k}/{len(args.model)}] {name}"
        source = ModelSource(name, args.init, args.seed, device, dtype, tokenizer=args.tokenizer)
        with err_console.status(Text(f"{step}: loading")):
            prepared = prepare_probe(source.load(), inputs, request)  # checked before probing
        loaded = prepared.measured
        err_console.print(
            Text(
                f"{step}: probing {len(variants)} variant(s) on {args.samples} sequences of "
                f"{args.tokens} tokens"
            )
        )
        with PassProgress(step) as progress:
            frame = prepared.run(progress)
        quantized = loaded.info.get("quantized", "no")
        labels.append(
            f"{loaded.name} ({loaded.init}{'' if quantized == 'no' else ', ' + quantized})"
        )
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    several = len(args.model) > 1
    df["arm"] = df["model"] + (" · " + df["variant"] if len(variants) > 1 else "")
    mask = df["mask"].iloc[0]
    title = (
        f"{', '.join(labels)}: "
        f"{'its own attention mask' if mask == 'model' else 'attention mask ' + mask}, "
        f"softmax temperature {args.temperature:g}, {'train' if args.train_mode else 'eval'} "
        f"mode, {args.dtype}"
    )
    hue = "arm" if several else "variant"
    # the numbers on disk first, then the table, printed while the figure is drawn
    write_collapse_outputs(df, out, hue=hue, title=title, floor=dtype, figures=figures)
    print_layer_means(df, title, keys=("model", "variant", "layer"))
    return 0


def _check_memory(args: argparse.Namespace) -> None:
    """Refuse sizes whose token ids and one batch's states (widths from the model registry;
    1 for a model directory: a lower bound) would not fit in memory, before any model loads."""
    from rankcollapse.cli.catalog import read_catalog
    from rankcollapse.sizes import check_memory, measure_bytes

    models = read_catalog()["models"]
    d_model = max((models[name]["d_model"] for name in args.model if name in models), default=1)
    batch = min(args.batch_size or args.samples, args.samples)
    needed = 8 * args.samples * args.tokens  # the token ids, int64
    needed += 4 * 8 * batch * args.tokens * d_model + measure_bytes(batch, args.tokens, d_model)
    sizes = {"n_samples": args.samples, "n_tokens": args.tokens, "batch_size": batch}
    check_memory(
        "probe",
        needed,
        sizes | {"d_model": d_model},
        "lower --n-samples or --n-tokens, or pass --batch-size",
    )
