"""`rankcollapse probe MODEL`: per-layer collapse of a real model's residual stream.

MODEL is a name (minilm, smollm2, bert-base, albert-base, xlnet-base, gpt2, llama-small) or a
local Hugging Face model directory; nothing reaches a hub. Prints a per-layer table per variant
and writes results.csv (model, init, variant, mask, ..., layer, layer_kind, sample, metric,
value, at_floor) and collapse.png to --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import add_metrics_option, parse_metrics


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "probe",
        help="per-layer collapse metrics of a real (pretrained or random-init) model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="model name or local model directory")
    parser.add_argument("--init", choices=["pretrained", "random"], default="pretrained")
    parser.add_argument(
        "--variants",
        default="transformer",
        help="comma list of variants (see `rankcollapse variants`), e.g. san,san+mlp,san+skip,transformer",
    )
    parser.add_argument(
        "--mask",
        default=None,
        help="attention mask replacing the model's own in every layer: complete, causal, window:W, "
        "causal_window:W, sinks:S:W, ... (see rankcollapse.masks.MASK_FAMILIES)",
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="softmax temperature T (logits / T)"
    )
    parser.add_argument("--train-mode", action="store_true", help="run with dropout on")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--text", type=Path, default=None, help="text file (default: built-in sample corpus)"
    )
    source.add_argument(
        "--random-tokens", action="store_true", help="random token ids instead of text"
    )
    parser.add_argument(
        "--padded",
        action="store_true",
        help="one paragraph per sample, padded (pads never enter metrics)",
    )
    parser.add_argument("--samples", type=int, default=32, help="number of sequences")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per sequence")
    add_metrics_option(parser)
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of random init, windows and random tokens"
    )
    parser.add_argument(
        "--batch-size", type=int, default=None, help="sequences per forward pass (default: all)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="output folder (default: results/probe/<model>)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._common import print_layer_means, write_collapse_outputs
    from rankcollapse.hf import get_variant, load_model, probe

    metrics = parse_metrics(args.metrics)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for name in variants:
        get_variant(name)
    loaded = load_model(args.model, init=args.init, seed=args.seed)
    df = probe(
        loaded,
        variants=variants,
        mask=args.mask,
        temperature=args.temperature,
        train_mode=args.train_mode,
        text=args.text,
        random_tokens=args.random_tokens,
        padded=args.padded,
        n_samples=args.samples,
        n_tokens=args.tokens,
        metrics=metrics,
        seed=args.seed,
        batch_size=args.batch_size,
    )
    quantized = loaded.info.get("quantized", "no")
    note = "" if quantized == "no" else f", weights {quantized}"
    for variant in variants:
        name = get_variant(variant).name
        title = (
            f"{loaded.name} ({loaded.init}{note}), variant {name}, mask {df['mask'].iloc[0]}, "
            f"T={args.temperature:g}, {'train' if args.train_mode else 'eval'} mode"
        )
        print_layer_means(df[df["variant"] == name], title)
    out = args.out or Path("results/probe") / Path(args.model).name
    title = f"{loaded.name} ({loaded.init}{note})"
    write_collapse_outputs(df, out, hue="variant", title=title)
    return 0
