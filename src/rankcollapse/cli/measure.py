"""`rankcollapse measure FILE`: the collapse table for your own saved activations.

Accepted files: `.npy`, `.pt` (loaded with `weights_only=True`), `.safetensors`. The states have
shape (layers, batch, n, d) or (batch, n, d); a `.pt`/`.safetensors` file may hold a dict with
keys `states` (or `hidden_states`) and `mask`. A token mask can also come from `--mask FILE`,
shape (batch, n), True (or 1) for real tokens.

Layers are read one at a time (a `.npy` by offset, a `.safetensors` by slice, a `.pt` memory-
mapped), so a file larger than memory is measured when one layer fits; a layer that does not
fit is refused, with its size and the memory it needs, before it is read.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankcollapse.cli._common import (
    DEVICE_METAVAR,
    add_figures_option,
    add_metrics_option,
    device_flag,
    parse_metrics,
)
from rankcollapse.cli._figures import FigureProcesses

SUFFIXES = (".npy", ".pt", ".safetensors")
STATE_KEYS = ("states", "hidden_states")
MAX_STATES_BYTES = 2**62  # no cap on the file: what it would allocate is checked per format
DIMS = ("layers", "sequences", "tokens", "features")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
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
        help="output folder (default: results/measure/<file stem>, or -2, -3, ... for another "
        "file or metrics)",
    )
    parser.add_argument(
        "--device",
        type=device_flag,
        metavar=DEVICE_METAVAR,
        default="cpu",
        help="where the metrics run, one layer at a time (float64; mps measures on the cpu)",
    )
    add_metrics_option(parser)
    add_figures_option(parser)
    parser.set_defaults(func=run)


@dataclass
class Layers:
    """Saved activations, read one layer at a time: `shape` as stored ((layers, batch, n, d) or
    (batch, n, d)), `dtype` (a torch dtype) and `read(l)`, layer l as a (batch, n, d) tensor."""

    shape: tuple[int, ...]
    dtype: Any
    read: Callable[[int], Any]

    @classmethod
    def of(cls, tensor: Any) -> Layers:
        """A tensor already in memory (a `.pt` file, memory-mapped)."""
        return cls(
            tuple(tensor.shape), tensor.dtype, lambda l: tensor[l] if tensor.dim() == 4 else tensor
        )

    def __len__(self) -> int:
        return self.shape[0] if len(self.shape) == 4 else 1

    def __iter__(self) -> Iterator[Any]:
        return (self.read(layer) for layer in range(len(self)))


def load_tensors(path: Path) -> dict:
    """Open a file safely as {'states': Layers, 'mask': tensor | None}, reading no layer yet.
    No pickle is executed; a .npy header is checked (dtype, rank, size against the file) before
    anything is allocated."""

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
        try:  # memory-mapped where the file allows it: a layer is paged in when measured
            content = _torch_load(path)
        except Exception as err:  # noqa: BLE001 - unsafe (refused), truncated or not torch
            raise InputError(
                f"'{path}' does not load safely as tensors (torch.load with weights_only=True "
                f"refused it: {type(err).__name__}). Save a tensor or a dict of tensors, e.g. "
                "torch.save({'states': x, 'mask': m}, path)."
            ) from None
    else:
        try:  # the header's offsets are checked against the file before any tensor is read
            content = _safetensors(path)
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
        states = content[key]
        return {
            "states": states
            if isinstance(states, Layers)
            else Layers.of(_dense(states, f"'{key}' in '{path}'")),
            "mask": None if mask is None else _dense(mask, f"'mask' in '{path}'"),
        }
    if isinstance(content, Layers):
        return {"states": content, "mask": None}
    return {"states": Layers.of(_dense(content, f"'{path}'")), "mask": None}


def _torch_load(path: Path):
    """torch.load with weights_only=True, memory-mapped when the file is a zip archive (what
    torch.save writes); an old-format file is read whole."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # not a zip archive: mmap cannot map it
        return torch.load(path, map_location="cpu", weights_only=True)


def _safetensors(path: Path) -> dict:
    """The tensors of a safetensors file: 'states' / 'hidden_states' as `Layers` read by slice,
    the others (a mask) read whole."""
    from safetensors import safe_open

    content: dict = {}
    with safe_open(path, framework="pt") as f:
        for key in f.keys():  # noqa: SIM118 - a safe_open handle is not iterable
            if key in STATE_KEYS:
                part = f.get_slice(key)
                shape = tuple(part.get_shape())
                content[key] = Layers(
                    shape, _torch_dtype(part.get_dtype()), _slice_reader(path, key, len(shape))
                )
            else:
                content[key] = f.get_tensor(key)
    return content


def _torch_dtype(name: str):
    import torch

    names = {
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "F32": torch.float32,
        "F64": torch.float64,
    }
    return names.get(name, torch.int64)  # anything else is refused as not floating point


def _slice_reader(path: Path, key: str, rank: int) -> Callable[[int], Any]:
    from safetensors import safe_open

    def read(layer: int):
        with safe_open(path, framework="pt") as f:
            part = f.get_slice(key)
            return part[layer] if rank == 4 else part[:]

    return read


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
    per_layer = int(np.prod(shape[1:], dtype=object))

    def read(layer: int):
        if len(shape) != 4 or _fortran:  # one layer (batch, n, d), or layers not contiguous
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            return torch.from_numpy(np.array(array[layer] if len(shape) == 4 else array))
        with open(path, "rb") as f:
            f.seek(data_start + layer * per_layer * dtype.itemsize)
            values = np.fromfile(f, dtype=dtype, count=per_layer)
        return torch.from_numpy(values.reshape(shape[1:]))

    return Layers(tuple(shape), torch.from_numpy(np.zeros(0, dtype=dtype)).dtype, read)


def as_layers(states: Layers, mask):
    """The checked shape (layers, batch, n, d) of `states` plus a boolean (batch, n) mask or
    None; clear errors, before any layer is read."""
    import torch

    from rankcollapse._validation import boolean_mask
    from rankcollapse.errors import InputError

    shape = tuple(states.shape)
    if len(shape) in (3, 4):
        dims = DIMS[-len(shape) :]
        empty = [f"{size} {what}" for size, what in zip(shape, dims, strict=True) if size == 0]
        if empty:
            raise InputError(
                f"activations have shape {shape}, i.e. {' and '.join(empty)}; "
                "save at least one layer, one sequence, two tokens and one feature, "
                "shape (layers, batch, n, d)."
            )
    else:
        raise InputError(
            f"activations have shape {shape}; expected (layers, batch, n, d) or (batch, n, d)."
        )
    if not states.dtype.is_floating_point:
        raise InputError(f"activations have dtype {states.dtype}; save floating-point states.")
    shape = shape if len(shape) == 4 else (1, *shape)
    if mask is not None:
        if tuple(mask.shape) != shape[1:3]:
            raise InputError(
                f"mask has shape {tuple(mask.shape)} but the activations have "
                f"{shape[1]} sequences of {shape[2]} tokens; pass a mask of shape "
                f"({shape[1]}, {shape[2]})."
            )
        mask = boolean_mask(mask)
    return torch.Size(shape), mask


def run(args: argparse.Namespace) -> int:
    with FigureProcesses(args.figures) as figures:  # they load matplotlib while we work
        return _measure(args, figures)


def _measure(args: argparse.Namespace, figures: FigureProcesses) -> int:
    from rankcollapse.cli._common import print_layer_means, write_collapse_outputs
    from rankcollapse.cli._output import output_folder
    from rankcollapse.devices import metrics_device, resolve_device
    from rankcollapse.metrics import measure_layers

    metrics = parse_metrics(args.metrics)
    device = metrics_device(resolve_device(args.device))
    content = load_tensors(args.file)
    mask = _mask(args.mask) if args.mask is not None else content["mask"]
    states = content["states"]
    shape, mask = as_layers(states, mask)
    _check_memory(shape, states.dtype)
    from rankcollapse.files import digest

    what = {"file": str(args.file.resolve()), "mask": str(args.mask), "metrics": metrics}
    out = output_folder(
        args.out,
        Path("results/measure") / args.file.stem,
        "measure",
        config=digest(what)[:10],
        label=args.file.name,
    )
    df = measure_layers(states, mask, metrics=metrics, source_dtype=states.dtype, device=device)
    title = f"{args.file.name}: {shape[0]} layers, {shape[1]} sequences ({states.dtype})"
    print_layer_means(df, title)
    write_collapse_outputs(df, out, hue=None, title=title, figures=figures)
    return 0


def _mask(path: Path):
    """A --mask file: one tensor of shape (batch, n), read whole (it is small)."""
    return load_tensors(path)["states"].read(0)


def _check_memory(shape, dtype) -> None:
    """Refuse a layer too big to measure here (read, then the metrics in float64), before it
    is read: the size and the memory it needs."""
    import torch

    from rankcollapse.sizes import check_memory, measure_bytes

    n_layers, n_samples, n_tokens, d_model = shape
    itemsize = torch.empty(0, dtype=dtype).element_size()
    needed = itemsize * n_samples * n_tokens * d_model + measure_bytes(n_samples, n_tokens, d_model)
    sizes = {"layers": n_layers, "n_samples": n_samples, "n_tokens": n_tokens, "d_model": d_model}
    check_memory(
        "measuring one layer", needed, sizes, "save fewer sequences per file (or split the file)"
    )
