"""`rankcollapse simulate`: run a toy attention network and measure collapse layer by layer.

Every field of `rankcollapse.nets.NetConfig` is an option (`--n-layers`, `--skip`, `--norm`, ...),
so the command and the Python API never drift apart. One exception in name only: the field
`temperature` (the d_QK of the score scale 1/sqrt(d_QK)) is `--scale-dqk`, since
`--temperature` means logits / T in `rankcollapse probe`; `--temperature` stays a hidden alias.

Each config writes to its own folder, results/simulate/<first 10 hex of its sha256>/, unless
`--out` is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import types
import typing
from pathlib import Path

from rankcollapse.cli._common import (
    add_figures_option,
    add_metrics_option,
    add_renamed_option,
    parse_metrics,
)
from rankcollapse.cli._figures import FigureProcesses
from rankcollapse.sizes import SIZES


def _option_kwargs(annotation: object, default: object) -> dict:
    """argparse keyword arguments for one pydantic field annotation."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # X | None: the inner type, None by default
        inner = [a for a in args if a is not type(None)]
        return _option_kwargs(inner[0], default)
    if origin is typing.Literal:
        return {"choices": list(args), "type": type(args[0])}
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if annotation in (int, float, str):
        return {"type": annotation}
    return {"type": str}


def _range(field: typing.Any) -> str:
    """'1..4096; ' for a size with both bounds (`rankcollapse.sizes`), else '' (a seed's
    64-bit range goes unsaid)."""
    from rankcollapse.sizes import field_bounds

    low, high = field_bounds(field.annotation, field.metadata)
    return f"{low}..{high}; " if low is not None and high is not None and high < 2**32 else ""


# CLI names that differ from the NetConfig field (the field's name stays a hidden alias).
OPTION_NAMES = {"temperature": "scale-dqk"}


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from rankcollapse.nets import NetConfig

    parser = subparsers.add_parser(
        "simulate",
        description="Run a toy attention network (default: a pure single-head self-attention "
        "network, which collapses) on Gaussian tokens and print each metric per layer.",
    )
    network = parser.add_argument_group("network (fields of rankcollapse.nets.NetConfig)")
    for name, field in NetConfig.model_fields.items():
        kwargs = _option_kwargs(field.annotation, field.default)
        help_text = (field.description or "").strip()
        flag = OPTION_NAMES.get(name, name.replace("_", "-"))
        network.add_argument(
            f"--{flag}",
            dest=f"net_{name}",
            default=None,
            help=f"{help_text} ({_range(field)}default: {field.default})",
            **kwargs,
        )
        if flag != name.replace("_", "-"):  # the field's own name, kept as a hidden alias
            network.add_argument(
                f"--{name.replace('_', '-')}", dest=f"net_{name}", help=argparse.SUPPRESS, **kwargs
            )
    add_renamed_option(
        parser,
        "--n-tokens",
        "--tokens",
        metavar="N",
        type=int,
        default=32,
        help=f"tokens per sequence ({SIZES['n_tokens']}; default: 32)",
    )
    add_renamed_option(
        parser,
        "--n-samples",
        "--batch",
        metavar="N",
        type=int,
        default=16,
        help=f"sequences ({SIZES['n_samples']}; default: 16)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/simulate/<config hash>/, one per config)",
    )
    add_metrics_option(parser)
    add_figures_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with FigureProcesses(args.figures) as figures:  # they load matplotlib while we work
        return _simulate(args, figures)


def _simulate(args: argparse.Namespace, figures: FigureProcesses) -> int:
    import torch

    from rankcollapse.cli._common import (
        check_sizes,
        print_layer_means,
        write_collapse_outputs,
    )
    from rankcollapse.cli._output import output_folder
    from rankcollapse.metrics import measure_layers
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens

    metrics = parse_metrics(args.metrics)
    overrides = {
        key.removeprefix("net_"): value
        for key, value in vars(args).items()
        if key.startswith("net_") and value is not None
    }
    _check_memory(overrides, args.n_samples, args.n_tokens)
    check_sizes(n_tokens=args.n_tokens, n_samples=args.n_samples)
    config = NetConfig(**overrides)
    key = _config_hash(config, args, metrics)
    defaults = NetConfig().model_dump(mode="json")
    changed = [f"{k}={v}" for k, v in config.model_dump(mode="json").items() if v != defaults[k]]
    label = ", ".join(["toy network", *changed])
    out = output_folder(
        args.out, Path("results/simulate") / key, "simulate", config=key, label=label
    )
    net = ToyNet(config)
    x = random_tokens(
        args.n_samples, args.n_tokens, config.d_model, seed=config.seed, dtype=net.dtype
    )
    with torch.no_grad():
        trace = net(x)
    df = measure_layers(trace.states, metrics=metrics, source_dtype=net.dtype)
    heads = f"{config.n_heads} head{'s' if config.n_heads > 1 else ''}"
    skip = {"off": "no skip", "on": "skip", "scaled": "scaled skip"}[config.skip]
    norm = "no norm" if config.norm == "none" else f"{config.norm}-norm"
    title = f"toy network: {config.n_layers} layers, {heads}, {skip}, "
    title += f"{'an MLP' if config.mlp else 'no MLP'}, {norm}, mask {config.mask}"
    print_layer_means(df, title)
    write_collapse_outputs(df, out, hue=None, title=title, floor=net.dtype, figures=figures)
    return 0


def _check_memory(overrides: dict, n_samples: int, n_tokens: int) -> None:
    """Refuse sizes whose states and weights would not fit in memory, before any check that
    needs a valid config and before anything is allocated (the bounds come next)."""
    from rankcollapse.nets import NetConfig
    from rankcollapse.sizes import check_memory, measure_bytes, toy_bytes

    net = {name: field.default for name, field in NetConfig.model_fields.items()} | overrides
    sizes = {k: net[k] for k in ("n_layers", "n_heads", "d_model")}
    sizes |= {"n_samples": n_samples, "n_tokens": n_tokens}
    d_mlp = (net["d_mlp"] or 4 * net["d_model"]) if net["mlp"] else 0
    itemsize = 8 if net["dtype"] == "float64" else 4
    needed = toy_bytes(**sizes, d_mlp=d_mlp, itemsize=itemsize)
    needed += measure_bytes(n_samples, n_tokens, net["d_model"])
    flags = ", ".join(f"--{name.replace('_', '-')}" for name in sizes)
    check_memory("simulate", needed, sizes, f"lower {flags}")


def _config_hash(config: typing.Any, args: argparse.Namespace, metrics: list[str] | None) -> str:
    """First 10 hex of the sha256 of everything that decides the numbers."""
    what = {
        "net": config.model_dump(mode="json"),
        "n_tokens": args.n_tokens,
        "n_samples": args.n_samples,
        "metrics": metrics,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:10]
