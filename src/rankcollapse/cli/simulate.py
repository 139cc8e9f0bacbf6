"""`rankcollapse simulate`: run a toy attention network and measure collapse layer by layer.

Every field of `rankcollapse.nets.NetConfig` is an option (`--n-layers`, `--skip`, `--norm`, ...),
so the command and the Python API never drift apart. One exception in name only: the field
`temperature` (the d_QK of the score scale 1/sqrt(d_QK)) is `--scale-dqk`, since
`--temperature` means logits / T in `rankcollapse probe`; `--temperature` stays a hidden alias.

`--variants san,san+skip,...` runs one network per toy variant of `rankcollapse variants` on the
same tokens, the other options on top of each (sizes, seed, mask, ...); an option that
contradicts a variant's own skip, MLP or norm is refused.

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
    comma_names,
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
        "--variants",
        default=None,
        help="comma list of toy variants (see `rankcollapse variants`), e.g. "
        "san,san+skip,san+mlp,transformer: one network each, on the same tokens, the other "
        "options set on top of each (default: one network from the options alone)",
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
    import pandas as pd
    import torch

    from rankcollapse.cli._common import (
        check_sizes,
        print_layer_means,
        write_collapse_outputs,
    )
    from rankcollapse.cli._output import output_folder
    from rankcollapse.metrics import measure_layers
    from rankcollapse.nets import TOY_VARIANTS, ToyNet, random_tokens
    from rankcollapse.nets.toy import DTYPES

    metrics = parse_metrics(args.metrics)
    overrides = {
        key.removeprefix("net_"): value
        for key, value in vars(args).items()
        if key.startswith("net_") and value is not None
    }
    names = _variant_names(args.variants)
    for name in names:  # before any network is built; a variant's MLP adds to the memory
        parts = TOY_VARIANTS[name] if name is not None else {}
        _check_memory({**parts, **overrides}, args.n_samples, args.n_tokens)
    check_sizes(n_tokens=args.n_tokens, n_samples=args.n_samples)
    configs = {name: _variant_config(name, overrides) for name in names}
    config = next(iter(configs.values()))  # the options all the networks share
    key = _config_hash(list(configs.values()), args, metrics)
    out = output_folder(
        args.out, Path("results/simulate") / key, "simulate", config=key, label=_label(configs)
    )
    dtype = DTYPES[config.dtype]
    x = random_tokens(args.n_samples, args.n_tokens, config.d_model, seed=config.seed, dtype=dtype)
    frames = []
    for variant, variant_config in configs.items():
        net = ToyNet(variant_config)
        with torch.no_grad():
            trace = net(x)
        df = measure_layers(trace.states, metrics=metrics, source_dtype=net.dtype)
        if variant is not None:
            df.insert(0, "variant", variant)
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    heads = f"{config.n_heads} head{'s' if config.n_heads > 1 else ''}"
    title = f"toy network: {config.n_layers} layers, {heads}, "
    keys: tuple[str, ...]
    if None in configs:
        skip = {"off": "no skip", "on": "skip", "scaled": "scaled skip"}[config.skip]
        norm = "no norm" if config.norm == "none" else f"{config.norm}-norm"
        title += f"{skip}, {'an MLP' if config.mlp else 'no MLP'}, {norm}, mask {config.mask}"
        hue, keys = None, ("layer",)
    else:  # a series and a table row per variant
        title += f"mask {config.mask}"
        hue, keys = "variant", ("variant", "layer")
    # the numbers on disk first, then the table, printed while the figure is drawn
    write_collapse_outputs(df, out, hue=hue, title=title, floor=dtype, figures=figures)
    print_layer_means(df, title, keys=keys)
    return 0


def _variant_names(value: str | None) -> list[str | None]:
    """The toy variants named in `value` ("san,san+skip"), each known and named once; [None]
    (one network from the options alone) without `value`."""
    from rankcollapse.errors import ConfigError, unknown_name
    from rankcollapse.nets import TOY_VARIANTS

    if value is None:
        return [None]
    names = comma_names(value, "--variants", "variant", "san,san+skip")
    for name in names:
        if name not in TOY_VARIANTS:
            raise unknown_name("toy variant", name, TOY_VARIANTS)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--variants names {twice} more than once; name each once.")
    return [*names]  # as list[str | None]


def _variant_config(name: str | None, overrides: dict) -> typing.Any:
    """The `NetConfig` of toy variant `name` with `overrides` set on top (`nets.toy_config`),
    or of `overrides` alone for None.

    A variant is its attention skip, MLP block and norm (`nets.TOY_VARIANTS`): an override of
    one of those that differs from the variant's own is refused, not applied.
    """
    from rankcollapse.errors import ConfigError
    from rankcollapse.nets import NetConfig, toy_config

    if name is None:
        return NetConfig(**overrides)
    own = toy_config(name).model_dump()
    for part in sorted(_variant_parts()):
        if part in overrides and overrides[part] != own[part]:
            flag = f"--{OPTION_NAMES.get(part, part).replace('_', '-')}"
            typed = _as_typed(flag, overrides[part])
            its = {True: "on", False: "off"}.get(own[part], own[part])
            raise ConfigError(
                f"{typed} contradicts variant {name}, whose {flag[2:]} is {its}; drop {typed}, "
                "or name a variant that has it (`rankcollapse variants` lists each one's skip, "
                "MLP and norm)."
            )
    return toy_config(name, **overrides)


def _as_typed(flag: str, value: object) -> str:
    """An option as a user types it: '--skip on', '--mlp', '--no-mlp'."""
    if isinstance(value, bool):
        return flag if value else f"--no-{flag[2:]}"
    return f"{flag} {value}"


def _label(configs: dict) -> str:
    """The folder's label: the variants, if named (one word, "variants san/san+skip"), and
    every option off its default that the networks share."""
    from rankcollapse.nets import NetConfig

    defaults = NetConfig().model_dump(mode="json")
    shared = next(iter(configs.values())).model_dump(mode="json")
    named = [name for name in configs if name is not None]
    own = _variant_parts() if named else set()  # said by the variants' names
    changed = [f"{k}={v}" for k, v in shared.items() if v != defaults[k] and k not in own]
    return ", ".join(["toy network", *([f"variants {'/'.join(named)}"] if named else []), *changed])


def _variant_parts() -> set[str]:
    """The `NetConfig` fields a toy variant sets (skip, mlp, norm, norm_kind)."""
    from rankcollapse.nets import TOY_VARIANTS

    return {part for options in TOY_VARIANTS.values() for part in options}


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


def _config_hash(configs: list, args: argparse.Namespace, metrics: list[str] | None) -> str:
    """First 10 hex of the sha256 of everything that decides the numbers (one network's config
    hashes as it always has, so a folder written before `--variants` is found again)."""
    nets = [config.model_dump(mode="json") for config in configs]
    what = {
        "net": nets[0] if len(nets) == 1 and args.variants is None else nets,
        "n_tokens": args.n_tokens,
        "n_samples": args.n_samples,
        "metrics": metrics,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:10]
