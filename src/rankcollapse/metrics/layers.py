"""Per-layer measurement of a stack of hidden states into one tidy table."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.errors import InputError
from rankcollapse.metrics.registry import names_of_kind
from rankcollapse.metrics.suite import measure_states, metrics_frame


def measure_layers(
    states: Sequence[Tensor] | Tensor,
    mask: Tensor | None = None,
    *,
    metrics: str | Sequence[str] | None = None,
    source_dtype: torch.dtype | None = None,
    device: torch.device | None = None,
    **ids: object,
) -> pd.DataFrame:
    """State metrics of every layer: tidy rows (ids..., layer, sample, metric, value, at_floor).

    `states[l]` is the state after layer l (l = 0: the input), shape (..., n, d); the floor
    flags use `source_dtype` (None = each state's own dtype). With `device`, each layer is
    moved there in turn and measured there (a file larger than the device's memory works
    layer by layer). This is the one loop every toy experiment and command measures with.

    Example:
        >>> frame = measure_layers([torch.eye(3), torch.ones(3, 3)], metrics=["mu_rel"], seed=0)
        >>> frame[["seed", "layer", "at_floor"]].values.tolist()
        [[0, 0, False], [0, 1, True]]
    """
    names = names_of_kind(metrics, "states")  # checked before any layer is measured
    if len(states) == 0:
        raise InputError(
            "states holds no layer; pass the state after every layer, the input first (at "
            "least one tensor of shape (..., n, d))."
        )
    if device is not None and mask is not None:
        mask = mask.to(device)
    frames = []
    for layer, x in enumerate(states):
        try:
            values = measure_states(
                x if device is None else x.to(device),
                mask,
                metrics=names,
                source_dtype=source_dtype,  # None: the state's own, once it is checked
            )
        except InputError as err:  # which layer: a file's NaN may be 40 layers deep
            raise type(err)(f"layer {layer} of the states: {err}") from None
        frames.append(metrics_frame(values, **ids, layer=layer))
    return pd.concat(frames, ignore_index=True)
