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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from rankcollapse.cli._common import add_metrics_option, add_sequence_options


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


def add_device_options(parser: argparse.ArgumentParser) -> None:
    """--device and --dtype, shared by probe, qk-rank and paths decompose."""
    from rankcollapse.devices import DEVICES, DTYPES

    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the model runs; auto = an accelerator when one is visible, else cpu",
    )
    parser.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="float32",
        help="parameter dtype of the model (metrics are float64 either way)",
    )


def fresh_folder(out: Path | None, default: Path) -> tuple[Path, str]:
    """(folder, message): --out as given (saying so when it overwrites), else a new folder."""
    if out is not None:
        exists = out.is_dir() and any(out.iterdir())
        return out, f"overwriting files in {out}" if exists else f"writing to {out}"
    folder, index = default, 1
    while folder.exists():
        index += 1
        folder = default.with_name(f"{default.name}-{index}")
    return folder, f"writing to a new folder {folder} (pass --out to choose one)"


def models_epilog() -> str:
    """The model registry and the families, for --help (read from `rankcollapse.hf`)."""
    from rankcollapse.hf import ARCHITECTURES, MODELS

    lines = ["named models (--init pretrained needs shipped weights; the rest are random-init):"]
    for spec in MODELS.values():
        kind = "pretrained" if spec.pretrained else "random"
        lines.append(
            f"  {spec.name:<16} {spec.family:<10} {spec.n_layers:>2} layers, {spec.n_heads:>2} "
            f"heads, {spec.d_model:>4} wide, {kind}: {spec.description}"
        )
    lines.append(
        "model directories of these families: " + ", ".join(sorted(ARCHITECTURES)) + " (see "
        "`rankcollapse variants`)"
    )
    return "\n".join(lines)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="per-layer collapse metrics of real (pretrained or random-init) models",
        description=__doc__,
        epilog=models_epilog,
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
        "--text", type=Path, default=None, help="text file (default: the built-in sample corpus)"
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
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of random init, windows and random tokens"
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="sequences per forward pass (default: all at once)",
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
    import pandas as pd

    from rankcollapse.cli._common import check_sizes, write_collapse_outputs
    from rankcollapse.cli._console import console
    from rankcollapse.devices import resolve_device, resolve_dtype
    from rankcollapse.hf import load_model, probe, resolve_probe

    check_sizes(n_samples=args.samples, n_tokens=args.tokens, batch_size=args.batch_size)
    # names are resolved once, by the API, before any model loads
    request = resolve_probe(args.variants, args.mask, args.metrics)
    variants = [variant.name for variant in request.variants]
    device, dtype = resolve_device(args.device), resolve_dtype(args.dtype)
    frames, labels = [], []
    for name in args.model:
        loaded = load_model(
            name, init=args.init, seed=args.seed, device=device, dtype=dtype,
            tokenizer=args.tokenizer,
        )  # fmt: skip
        frame = probe(
            loaded,
            variants=request.variants,
            mask=request.mask,
            temperature=args.temperature,
            train_mode=args.train_mode,
            text=args.text,
            random_tokens=args.random_tokens,
            padded=args.padded,
            images=args.images,
            n_samples=args.samples,
            n_tokens=args.tokens,
            metrics=request.metrics,
            seed=args.seed,
            batch_size=args.batch_size,
        )
        quantized = loaded.info.get("quantized", "no")
        labels.append(
            f"{loaded.name} ({loaded.init}{'' if quantized == 'no' else ', ' + quantized})"
        )
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    several = len(args.model) > 1
    df["arm"] = df["model"] + (" · " + df["variant"] if len(variants) > 1 else "")
    title = (
        f"{', '.join(labels)}; mask {df['mask'].iloc[0]}, T={args.temperature:g}, "
        f"{'train' if args.train_mode else 'eval'} mode, dtype {args.dtype}"
    )
    _print_means(df, title)
    default = Path("results/probe") / "+".join(Path(m).name for m in args.model)
    out, message = fresh_folder(args.out, default)
    console.print(message)
    hue = "arm" if several else "variant"
    write_collapse_outputs(df, out, hue=hue, title=title, floor=dtype)
    return 0


def _print_means(df: pd.DataFrame, title: str) -> None:
    """One table: a row per (model, variant, layer), a column per metric (mean over samples;
    '<floor' where every sample sits at the dtype floor, '-' where a metric has no value)."""
    import pandas as pd
    from rich.table import Table

    from rankcollapse.cli._console import console

    keys = ["model", "variant", "layer"]
    means = df.pivot_table(index=keys, columns="metric", values="value", aggfunc="mean", sort=False)
    floors = df.pivot_table(index=keys, columns="metric", values="at_floor", aggfunc="all")
    metrics = list(dict.fromkeys(df["metric"]))
    table = Table(title=title)
    for key in keys:
        table.add_column(key, justify="right" if key == "layer" else "left")
    for name in metrics:
        table.add_column(name, justify="right")
    for index in means.index:
        cells = []
        for name in metrics:
            mean = means.loc[index, name]
            at_floor = floors.loc[index, name] if name in floors.columns else False
            if pd.isna(mean):  # no value at this layer (attention metrics at layer 0)
                cells.append("-")
            else:
                cells.append("<floor" if at_floor == 1 else f"{mean:.3g}")
        table.add_row(str(index[0]), str(index[1]), str(index[2]), *cells)
    console.print(table)
