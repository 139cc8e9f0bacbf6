"""The `rankcollapse` command line. Each subcommand lives in its own module of this package
and exposes `add_parser(subparsers)`, which registers the parser and sets `func(args) -> int`.
Heavy imports happen inside `func`, so `rankcollapse --version` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# The CLI owns the terminal: third-party progress bars (e.g. GGUF dequantisation) stay quiet.
os.environ.setdefault("TQDM_DISABLE", "1")

from rankcollapse import __version__
from rankcollapse.cli._common import typed_numbers
from rankcollapse.errors import RankCollapseError

# One line per subcommand module; add yours here.
COMMAND_MODULES = [
    "metrics_cmd",
    "simulate",
    "measure",
    "run",
    "list_cmd",
    "report_cmd",
    "probe",
    "variants",
    "paths",
    "qk_rank",
    "reproduce",
    "compare",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rankcollapse",
        description="Measure, explain and reproduce rank collapse in attention networks.",
    )
    parser.add_argument("--version", action="version", version=f"rankcollapse {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"rankcollapse.cli.{name}").add_parser(subparsers)
    typed_numbers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except RankCollapseError as err:
        from rankcollapse.cli._console import err_console

        err_console.print(f"[bold red]error:[/] {err}", highlight=False)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished work is kept.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
