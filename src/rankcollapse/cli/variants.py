"""`rankcollapse variants`: what each architectural variant removes, per architecture.

Variants are applied by forward hooks (never by editing model code); see
`rankcollapse.hf.variants` for the mechanics.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "variants",
        help="list the model variants (san, san+mlp, ..., wu:san+ln) and their exact meaning",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--arch", default=None, help="only this architecture (bert, albert, xlnet, gpt2, llama)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.errors import unknown_name
    from rankcollapse.hf import ARCHITECTURES, VARIANTS, describe

    if args.arch is not None and args.arch not in ARCHITECTURES:
        raise unknown_name("architecture", args.arch, ARCHITECTURES)
    summary = Table(title="variants (on = kept)")
    for column in ("variant", "family", "attention skip", "MLP block", "norms"):
        summary.add_column(column)
    for v in VARIANTS.values():
        flags = ["on" if f else "off" for f in (v.attention_skip, v.mlp, v.norms)]
        summary.add_row(v.name, v.family, *flags)
    console.print(summary)
    archs = [ARCHITECTURES[args.arch]] if args.arch else list(ARCHITECTURES.values())
    for arch in archs:
        table = Table(title=f"{arch.name} ({', '.join(arch.model_types)}), {arch.norm_position}-LN")
        table.add_column("variant")
        table.add_column("exact meaning")
        for v in VARIANTS.values():
            table.add_row(v.name, describe(v, arch))
        console.print(table)
        if arch.notes:
            console.print(f"  note: {arch.notes}")
    return 0
