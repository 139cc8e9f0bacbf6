"""`rankcollapse variants`: the variants, the model families, and what each variant removes.

Prints the variants (which parts of every block stay on), how the toy network (simulate, the
toy experiments) realises the same names (one difference: a toy san has no norm, as in Dong
et al.'s theory; san+ln is toy-only), one row per model family (block
layout, causal or not, whether masks and temperature apply, whether the per-length path
decomposition is offered, whether Dong et al.'s own surgery is defined) and, with --arch, the
exact meaning of every variant for that family, naming its modules. Variants are applied by
forward hooks, never by editing model code (`rankcollapse.hf.variants`).
"""

from __future__ import annotations

import argparse

from rankcollapse.cli._common import HelpFormatter


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "variants",
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--arch",
        nargs="*",
        default=None,
        help="families whose variants to spell out (no name: every family); "
        "default: the tables only",
    )
    parser.set_defaults(func=run)


def family_rows() -> list[dict[str, str]]:
    """One row per registered family: what it is and what it supports."""
    from rankcollapse.hf import ARCHITECTURES

    rows = []
    for arch in ARCHITECTURES.values():
        rows.append(
            {
                "family": arch.name,
                "model_type": ", ".join(arch.model_types)
                + "".join(f" ({k}={v})" for k, v in arch.requires),
                "block": arch.block_kind + (", QK-norm" if arch.qk_norm else ""),
                "causal": "yes" if arch.causal else "no",
                "masks, temperature": "yes" if arch.attention_interface else "no",
                "decomposition": "yes" if arch.decomposable else "no",
                "dong-authors": "yes" if arch.authors_surgery else "no",
                "inputs": arch.inputs,
            }
        )
    return rows


def families_title(rows: list[dict[str, str]], variants: dict) -> str:
    """The families table's title: which variants work for every family, and for how many the
    authors' surgery (`dong-authors:*`) is defined."""
    sets = sorted({v.family for v in variants.values()} - {"dong-authors"})
    n_authors = sum(row["dong-authors"] == "yes" for row in rows)
    return (
        f"model families (qk-rank and the {' and '.join(sets)} variants work for every family; "
        f"dong-authors:* for the {n_authors} of {len(rows)} marked yes)"
    )


def toy_table():
    """The toy network's variants, read from `nets.variants.TOY_VARIANTS` (`toy_rows`)."""
    from rich.table import Table

    from rankcollapse.nets.variants import toy_rows

    table = Table(
        title="the toy network's variants (`simulate --variants`, toy experiments): skip and "
        "MLP as above; its own norms: a toy san has no norm (Dong et al.'s theory), san+ln is "
        "toy-only"
    )
    rows = toy_rows()
    for column in rows[0]:
        table.add_column(column)
    for row in rows:
        table.add_row(*row.values())
    return table


def run(args: argparse.Namespace) -> int:
    from rich.table import Table

    from rankcollapse.cli._console import console
    from rankcollapse.errors import unknown_name
    from rankcollapse.hf import ARCHITECTURES, VARIANTS, describe

    names = [] if args.arch is None else args.arch or list(ARCHITECTURES)
    for name in names:
        if name not in ARCHITECTURES:
            raise unknown_name("family", name, ARCHITECTURES)
    summary = Table(title="variants (on = kept)")
    for column in ("variant", "set", "attention skip", "MLP block", "norms"):
        summary.add_column(column)
    for v in VARIANTS.values():
        flags = ["on" if f else "off" for f in (v.attention_skip, v.mlp, v.norms)]
        summary.add_row(v.name, v.family, *flags)
    console.print(summary)
    console.print(toy_table())
    rows = family_rows()
    families = Table(title=families_title(rows, VARIANTS))
    for column in rows[0]:
        families.add_column(column)
    for row in rows:
        families.add_row(*row.values())
    console.print(families)
    for name in names:
        arch = ARCHITECTURES[name]
        table = Table(title=f"{arch.name} ({', '.join(arch.model_types)}), {arch.block_kind}")
        table.add_column("variant")
        table.add_column("exact meaning")
        for v in VARIANTS.values():
            table.add_row(v.name, describe(v, arch))
        console.print(table)
        if arch.notes:
            console.print(f"  note: {arch.notes}")
    if not names:
        console.print("exact meaning per family: rankcollapse variants --arch NAME [NAME ...]")
    return 0
