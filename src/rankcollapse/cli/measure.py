"""`rankcollapse measure FILE`: the collapse table for your own saved activations.

Accepted files: `.npy`, `.pt` (loaded with `weights_only=True`), `.safetensors`. The states have
shape (layers, batch, n, d) or (batch, n, d); a `.pt`/`.safetensors` file may hold a dict with
keys `states` (or `hidden_states`) and `mask`. A token mask can also come from `--mask FILE`,
shape (batch, n), True (or 1) for real tokens.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rankcollapse.cli._common import add_figures_option, add_metrics_option, parse_metrics

SUFFIXES = (".npy", ".pt", ".safetensors")
STATE_KEYS = ("states", "hidden_states")
DIMS = ("layers", "sequences", "tokens", "features")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from rankcollapse.devices import DEVICES

    parser = subparsers.add_parser(
        "measure",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file", type=Path, help="activations, shape (layers, batch, n, d) or (batch, n, d)"
    )
    parser.add_argument("--mask", type=Path, default=None, help="token mask file, shape (batch, n)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/measure/<file stem>)",
    )
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the metrics run, one layer at a time (float64; mps measures on the cpu)",
    )
    add_metrics_option(parser)
    add_figures_option(parser)
    parser.set_defaults(func=run)


def load_tensors(path: Path) -> dict:
    """Read a file safely into {'states': tensor, 'mask': tensor | None}. No pickle is executed."""
    import pickle

    import numpy as np
    import torch

    from rankcollapse.errors import InputError

    if not path.is_file():
        raise InputError(f"no file at '{path}'; pass the path of a {', '.join(SUFFIXES)} file.")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"'{path.name}' has suffix '{suffix}'; supported: {', '.join(SUFFIXES)}.")
    if suffix == ".npy":
        try:
            content = torch.from_numpy(np.load(path, allow_pickle=False))
        except ValueError as err:
            raise InputError(f"'{path}' is not a plain numeric .npy array ({err}).") from None
    elif suffix == ".pt":
        try:
            content = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError) as err:  # unsafe or broken
            raise InputError(
                f"'{path}' does not load safely as tensors (torch.load with weights_only=True "
                f"refused it: {type(err).__name__}). Save a tensor or a dict of tensors, e.g. "
                "torch.save({'states': x, 'mask': m}, path)."
            ) from None
    else:
        from safetensors.torch import load_file

        content = load_file(path)
    if isinstance(content, torch.Tensor):
        return {"states": content, "mask": None}
    if isinstance(content, dict):
        key = next((k for k in STATE_KEYS if k in content), None)
        if key is None:
            raise InputError(
                f"'{path}' holds keys {sorted(content)}; expected one of {list(STATE_KEYS)} "
                "(and optionally 'mask')."
            )
        return {"states": content[key], "mask": content.get("mask")}
    raise InputError(
        f"'{path}' holds a {type(content).__name__}; save a tensor or a dict of tensors."
    )


def as_layers(states, mask):
    """States as (layers, batch, n, d) plus a boolean (batch, n) mask or None; clear errors."""
    import torch

    from rankcollapse.errors import InputError

    if states.dim() in (3, 4):
        dims = DIMS[-states.dim() :]
        empty = [f"{size} {what}" for size, what in zip(states.shape, dims) if size == 0]
        if empty:
            raise InputError(
                f"activations have shape {tuple(states.shape)}, i.e. {' and '.join(empty)}; "
                "save at least one layer, one sequence, two tokens and one feature, "
                "shape (layers, batch, n, d)."
            )
    if states.dim() == 3:
        states = states.unsqueeze(0)
    if states.dim() != 4:
        raise InputError(
            f"activations have shape {tuple(states.shape)}; expected (layers, batch, n, d) "
            "or (batch, n, d)."
        )
    if not states.is_floating_point():
        raise InputError(f"activations have dtype {states.dtype}; save floating-point states.")
    if mask is not None:
        mask = mask.to(torch.bool)
        if mask.shape != states.shape[1:3]:
            raise InputError(
                f"mask has shape {tuple(mask.shape)} but the activations have "
                f"{states.shape[1]} sequences of {states.shape[2]} tokens; pass a mask of shape "
                f"({states.shape[1]}, {states.shape[2]})."
            )
    return states, mask


def run(args: argparse.Namespace) -> int:
    from rankcollapse.cli._common import output_folder, print_layer_means, write_collapse_outputs
    from rankcollapse.devices import metrics_device, resolve_device
    from rankcollapse.metrics import measure_layers

    metrics = parse_metrics(args.metrics)
    device = metrics_device(resolve_device(args.device))
    content = load_tensors(args.file)
    mask = load_tensors(args.mask)["states"] if args.mask is not None else content["mask"]
    states, mask = as_layers(content["states"], mask)
    out = output_folder(
        args.out, Path("results/measure") / args.file.stem, "measure", label=args.file.name
    )
    df = measure_layers(
        list(states), mask, metrics=metrics, source_dtype=states.dtype, device=device
    )
    title = (
        f"{args.file.name}: {states.shape[0]} layers, {states.shape[1]} sequences ({states.dtype})"
    )
    print_layer_means(df, title)
    write_collapse_outputs(df, out, hue=None, title=title, figures=args.figures)
    return 0
