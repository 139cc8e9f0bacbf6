"""Activations saved to a file, measured: what `rankcollapse measure FILE` does, from Python.

`save_activations(path, states, mask)` writes the file `measure` reads (safetensors, the
states under `states`, the mask under `mask`); `measure_file(path)` measures it a layer at a
time (`metrics.measure_layers`), after `reading.read_activations` has checked its header,
dtype, sizes and the memory one layer needs.

Example:
    >>> import tempfile, torch
    >>> states = [torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(l)) for l in range(3)]
    >>> path = save_activations(tempfile.mkdtemp() + "/acts.safetensors", states)
    >>> measure_file(path, metrics=["mu_rel"]).groupby("layer").size().tolist()
    [2, 2, 2]
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.files import write_atomic
from rankcollapse.reading import Activations, read_activations, shown

if TYPE_CHECKING:
    import pandas as pd


def save_activations(
    path: str | os.PathLike, states: Tensor | Sequence[Tensor], mask: Tensor | None = None
) -> Path:
    """Write `states` (and `mask`) as the safetensors file `rankcollapse measure` and
    `measure_file` read; returns the path.

    Args:
        path: a new or replaceable `.safetensors` file (written whole or not at all).
        states: one tensor (layers, batch, n, d), or one (batch, n, d) tensor per layer, layer 0
            the embedding output (a Hugging Face `output_hidden_states` tuple, or a
            TransformerLens cache's `blocks.0.hook_resid_pre` then every
            `blocks.{l}.hook_resid_post`); any floating dtype, kept as it is.
        mask: True (or 1) for real tokens, shape (batch, n); None when every token is real.
    """
    path = Path(path)
    if path.suffix.lower() != ".safetensors":
        raise InputError(
            f"save_activations writes safetensors; name the file NAME.safetensors, not "
            f"{shown(path.name)!r}."
        )
    if not isinstance(states, Tensor):
        layers = list(states)
        if not layers or not all(isinstance(x, Tensor) for x in layers):
            raise InputError(
                "states must be one tensor (layers, batch, n, d) or a non-empty sequence of "
                "(batch, n, d) tensors, one per layer."
            )
        if len({tuple(x.shape) for x in layers}) > 1:
            shapes = sorted({tuple(x.shape) for x in layers})
            raise InputError(f"the layers' states have different shapes {shapes}; save one shape.")
        states = torch.stack([x.detach() for x in layers])
    tensors = {"states": states.detach().cpu().contiguous()}
    if mask is not None:
        tensors["mask"] = torch.as_tensor(mask).detach().cpu().to(torch.bool).contiguous()
    from rankcollapse.reading import Layers, check_activations

    check_activations(Layers.of(tensors["states"]), tensors.get("mask"))
    from safetensors.torch import save

    write_atomic(path, save(tensors))
    return path


def measure_activations(
    activations: Activations,
    *,
    metrics: Sequence[str] | None = None,
    device: torch.device | None = None,
) -> pd.DataFrame:
    """Per-layer metrics of an opened activations file (`reading.read_activations`), one layer
    read and measured at a time (on `device`, None: where the states are): tidy rows (layer,
    sample, metric, value, at_floor)."""
    from rankcollapse.metrics import measure_layers

    states = activations.states
    return measure_layers(
        states,  # type: ignore[arg-type]  # a sequence of layers, read one at a time
        activations.mask,
        metrics=metrics,
        source_dtype=states.dtype,
        device=device,
    )


def measure_file(
    path: str | os.PathLike,
    mask: str | os.PathLike | Tensor | None = None,
    *,
    metrics: str | Sequence[str] | None = None,
    device: str | torch.device = "cpu",
) -> pd.DataFrame:
    """`rankcollapse measure FILE` from Python: the per-layer metrics of saved activations
    (`.safetensors`, `.npy`, `.pt`; see `save_activations`), the metric names, the device and
    every size checked before a layer is read. `mask`: a (batch, n) tensor, a file holding
    one, or None for the file's own."""
    from rankcollapse.devices import metrics_device, resolve_device
    from rankcollapse.metrics.registry import names_of_kind

    where = metrics_device(resolve_device(device))
    names = names_of_kind(metrics, "states")
    activations = read_activations(path, mask)
    return measure_activations(activations, metrics=names, device=where)


__all__ = ["measure_activations", "measure_file", "save_activations"]
