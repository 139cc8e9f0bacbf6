"""The `rankcollapse` command line. Each subcommand lives in its own module of this package
and exposes `add_parser(subparsers)`, which registers the parser and sets `func(args) -> int`.

`COMMANDS` names each command's module and its help line; only the module of the command being
run is imported (heavy imports happen inside `func`), so `rankcollapse --version`, `--help` and
`COMMAND --help` start in a fraction of a second.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import sys
from collections.abc import Iterable

# The CLI owns the terminal: third-party progress bars (e.g. GGUF dequantisation) stay quiet.
os.environ.setdefault("TQDM_DISABLE", "1")
# The command's own pydantic models need no pydantic plugins: without this, building the first
# one searches every installed package's entry points (importlib.metadata), tens of
# milliseconds of each command. A value the user set is kept.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from rankcollapse import __version__
from rankcollapse.cli._common import reject_unknown, typed_numbers
from rankcollapse.errors import OutputError, RankCollapseError, command_line_words
from rankcollapse.process import ends_after_command, fast_imports, skip_teardown

# command -> (its module in this package, its help line); add yours here.
COMMANDS = {
    "metrics": ("metrics_cmd", "list the metrics (name, kind, formula, reference)"),
    "simulate": ("simulate", "run a toy attention network and measure its collapse per layer"),
    "measure": ("measure", "measure collapse in saved activations (.npy, .pt, .safetensors)"),
    "run": ("run", "run an experiment (or 'all') and write its results and report"),
    "list": ("list_cmd", "list the experiments with a one-line description and their presets"),
    "report": (
        "report_cmd",
        "rebuild report.html, claims and figures of a finished run from its results.csv",
    ),
    "probe": ("probe", "per-layer collapse metrics of real models, pretrained or at random init"),
    "variants": (
        "variants",
        "list the variants (san, ..., wu:san+ln, dong-authors:san) and the model families",
    ),
    "paths": (
        "paths",
        "path counts, exact per-length decompositions and attention products (Dong et al.)",
    ),
    "qk-rank": ("qk_rank", "numerical, stable and effective rank of W_Q^T W_K per layer and head"),
    "reproduce": (
        "reproduce",
        "one table of every paper finding beside our measurement, from stored runs",
    ),
    "compare": ("compare", "curves of several stored probe/simulate/run folders side by side"),
    "plot-training": (
        "plot_training",
        "heat map and curves of collapse over training, from monitor CSV logs",
    ),
}


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser. Commands in `commands` (default: every one) get their options, which imports
    their modules; the others are listed by name and help line only."""
    wanted = set(COMMANDS if commands is None else commands)
    parser = argparse.ArgumentParser(
        prog="rankcollapse",
        description="Measure, explain and reproduce rank collapse in attention networks.",
    )
    parser.add_argument("--version", action="version", version=f"rankcollapse {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if name in wanted:
            table = argparse.Namespace(
                add_parser=functools.partial(subparsers.add_parser, help=summary)
            )
            importlib.import_module(f"rankcollapse.cli.{module}").add_parser(table)
        else:
            subparsers.add_parser(name, help=summary)
    typed_numbers(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command in `argv` (default: this process's own arguments, as the console
    script does; then the process's imports also skip the garbage collector and, once the
    command returns, its end skips the modules' teardown, see `rankcollapse.process`) and
    return its exit status."""
    if argv is None:  # the console script: once the command returns, the process ends
        fast_imports()
        ends_after_command()
        return skip_teardown(main(sys.argv[1:]))
    # Top-level options take no value, so the first other word is the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser([command] if command in COMMANDS else [])
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        reject_unknown(parser, command, unknown)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        with command_line_words():  # errors name flags, not keyword arguments
            return int(args.func(args) or 0)
    except RankCollapseError as err:
        from rankcollapse.cli._console import print_error

        message = str(err)
        if isinstance(err, OutputError) and hasattr(args, "out") and "--out" not in message:
            message += " (--out chooses where this command writes.)"
        print_error(message)
        return 2
    except KeyboardInterrupt:
        from rankcollapse.cli._console import INTERRUPTED

        print(INTERRUPTED, file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
