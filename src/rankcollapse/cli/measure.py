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
from rankcollapse.cli._figures import FigureProcesses

SUFFIXES = (".npy", ".pt", ".safetensors")
STATE_KEYS = ("states", "hidden_states")
MAX_STATES_BYTES = 2**62  # no cap on the file: what it would allocate is checked per format
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
    """Read a file safely into {'states': tensor, 'mask': tensor | None}. No pickle is executed;
    a .npy header is checked (dtype, rank, size against the file) before anything is allocated."""
    import torch

    from rankcollapse.errors import InputError
    from rankcollapse.reading import checked_size

    fix = f"pass the path of a {', '.join(SUFFIXES)} file"
    checked_size(  # a folder, FIFO or device is refused unopened
        path,
        MAX_STATES_BYTES,
        error=lambda problem: InputError(
            f"no file at '{path}'; {fix}."
            if problem == "missing"
            else f"'{path}' is {problem}; {fix}."
        ),
    )
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise InputError(f"'{path.name}' has suffix '{suffix}'; supported: {', '.join(SUFFIXES)}.")
    if suffix == ".npy":
        content = _load_npy(path)
    elif suffix == ".pt":
        try:
            content = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 - unsafe (refused), truncated or not torch
            raise InputError(
                f"'{path}' does not load safely as tensors (torch.load with weights_only=True "
                f"refused it: {type(err).__name__}). Save a tensor or a dict of tensors, e.g. "
                "torch.save({'states': x, 'mask': m}, path)."
            ) from None
    else:
        from safetensors.torch import load_file

        try:  # the header's offsets are checked against the file before any tensor is read
            content = load_file(path)
        except Exception as err:  # noqa: BLE001 - SafetensorError and the OS's errors
            reason = " ".join(str(err).split())[:200] or type(err).__name__
            raise InputError(
                f"'{path}' is not a readable safetensors file ({reason}); save it again with "
                "safetensors.torch.save_file({'states': x}, path)."
            ) from None
    if isinstance(content, dict):
        key = next((k for k in STATE_KEYS if k in content), None)
        if key is None:
            raise InputError(
                f"'{path}' holds keys {sorted(map(str, content))}; expected one of "
                f"{list(STATE_KEYS)} (and optionally 'mask')."
            )
        mask = content.get("mask")
        return {
            "states": _dense(content[key], f"'{key}' in '{path}'"),
            "mask": None if mask is None else _dense(mask, f"'mask' in '{path}'"),
        }
    return {"states": _dense(content, f"'{path}'"), "mask": None}


def _dense(value: object, where: str):
    """`value` if it is a dense tensor, else a clear error."""
    import torch

    from rankcollapse.errors import InputError

    if not isinstance(value, torch.Tensor):
        raise InputError(
            f"{where} holds a {type(value).__name__}; save a tensor or a dict of tensors."
        )
    if value.layout != torch.strided:
        raise InputError(f"{where} holds a sparse tensor ({value.layout}); save x.to_dense().")
    return value


def _load_npy(path: Path):
    """A .npy array of numbers, its header checked first: a declared shape the file cannot hold,
    or strings, records and objects, fail before any memory is taken."""
    import numpy as np
    import torch

    from rankcollapse.errors import InputError

    readers = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }
    with open(path, "rb") as f:
        try:
            shape, _fortran, dtype = readers[np.lib.format.read_magic(f)](f)
        except Exception as err:  # noqa: BLE001 - empty, truncated or not a .npy header
            reason = " ".join(str(err).split())[:200] or type(err).__name__
            raise InputError(
                f"'{path}' is not a .npy file numpy wrote ({reason}); save it with np.save."
            ) from None
        data_start = f.tell()
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise InputError(
            f"'{path}' holds an array of dtype {dtype} ({dtype.kind!r}); save floating-point "
            "states (float16, float32, float64) and a boolean or 0/1 mask."
        )
    needed = int(np.prod(shape, dtype=object)) * dtype.itemsize
    held = path.stat().st_size - data_start
    if needed != held:
        raise InputError(
            f"'{path}' declares shape {shape} of {dtype} ({needed} bytes) but holds {held} bytes "
            "of data; the file is damaged or was not fully written: save it again with np.save."
        )
    return torch.from_numpy(np.load(path, allow_pickle=False))


def as_layers(states, mask):
    """States as (layers, batch, n, d) plus a boolean (batch, n) mask or None; clear errors."""
    from rankcollapse._validation import boolean_mask
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
        if mask.shape != states.shape[1:3]:
            raise InputError(
                f"mask has shape {tuple(mask.shape)} but the activations have "
                f"{states.shape[1]} sequences of {states.shape[2]} tokens; pass a mask of shape "
                f"({states.shape[1]}, {states.shape[2]})."
            )
        mask = boolean_mask(mask)
    return states, mask


def run(args: argparse.Namespace) -> int:
    with FigureProcesses(args.figures) as figures:  # they load matplotlib while we work
        return _measure(args, figures)


def _measure(args: argparse.Namespace, figures: FigureProcesses) -> int:
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
    write_collapse_outputs(df, out, hue=None, title=title, figures=figures)
    return 0
