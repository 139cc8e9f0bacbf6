"""`rankcollapse simulate`: run a toy attention network and measure collapse layer by layer.

Every field of `rankcollapse.nets.NetConfig` is an option (`--n-layers`, `--skip`, `--norm`, ...),
so the command and the Python API never drift apart.
"""

from __future__ import annotations

import argparse
import types
import typing
from pathlib import Path

from rankcollapse.cli._common import add_metrics_option, parse_metrics


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


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from rankcollapse.nets import NetConfig

    parser = subparsers.add_parser(
        "simulate",
        help="run a toy attention network and measure its collapse per layer",
        description="Run a toy attention network (default: a pure single-head self-attention "
        "network, which collapses) on Gaussian tokens and print each metric per layer.",
    )
    network = parser.add_argument_group("network (fields of rankcollapse.nets.NetConfig)")
    for name, field in NetConfig.model_fields.items():
        kwargs = _option_kwargs(field.annotation, field.default)
        help_text = (field.description or "").strip()
        network.add_argument(
            f"--{name.replace('_', '-')}",
            dest=f"net_{name}",
            default=None,
            help=f"{help_text} (default: {field.default})",
            **kwargs,
        )
    parser.add_argument("--tokens", type=int, default=32, help="tokens per sequence (default: 32)")
    parser.add_argument("--batch", type=int, default=16, help="sequences (default: 16)")
    parser.add_argument("--out", type=Path, default=Path("results/simulate"), help="output folder")
    add_metrics_option(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._common import layer_table, print_layer_means, write_collapse_outputs
    from rankcollapse.errors import ConfigError
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens

    metrics = parse_metrics(args.metrics)
    for name, value in (("--tokens", args.tokens), ("--batch", args.batch)):
        if value < 1 or (name == "--tokens" and value < 2):
            raise ConfigError(
                f"{name} is {value}; it must be at least {2 if name == '--tokens' else 1}."
            )
    overrides = {
        key.removeprefix("net_"): value
        for key, value in vars(args).items()
        if key.startswith("net_") and value is not None
    }
    config = NetConfig(**overrides)
    net = ToyNet(config)
    x = random_tokens(args.batch, args.tokens, config.d_model, seed=config.seed, dtype=net.dtype)
    trace = net(x)
    df = layer_table(trace.states, metrics=metrics, source_dtype=net.dtype)
    title = f"toy network: {config.n_layers} layers, {config.n_heads} heads, skip={config.skip}, "
    title += f"mlp={config.mlp}, norm={config.norm}, mask={config.mask}"
    print_layer_means(df, title)
    write_collapse_outputs(df, args.out, hue=None, title=title)
    return 0
