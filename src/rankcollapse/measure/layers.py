"""The one per-layer measurement of the probe, the curves and the monitor, for every kind of
model (`measure.kinds.Measured`): the checks a model and a batch pass before any forward pass,
and the `on_layer` callback that measures each captured layer.

`run_probe` and the monitor's `watch` call `check_model` (every variant defined for the
model; a text model's context long enough) and `prepare_batch` (the attention mask built once
and injected, the pattern attended with, mask and temperature checked once against the model)
before the first forward; `measure_batch` then runs each variant over the batch (in chunks of `batch_size`),
streaming every layer to a `LayerMeasure`, which copies its states into a group of a few
layers, measures the group in one call once it holds `layers_per_call` layers or the pass
ends (metrics float64 on the states' device, MPS: the CPU; floor flags of the states' dtype),
and drops the states.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd
import torch
from torch import Tensor

from rankcollapse.devices import metrics_device
from rankcollapse.errors import InputError, option
from rankcollapse.hf import LayerCapture
from rankcollapse.masks import causal
from rankcollapse.measure.kinds import Measured
from rankcollapse.measure.request import ProbeRequest
from rankcollapse.metrics import (
    MetricInfo,
    MetricValue,
    measure_attention,
    measure_states,
    metrics_frame,
)

Progress = Callable[[int, int, int], None]
"""`progress(passes_done, n_passes, layers_done)`: called after each group of layers measured
(`layers_done`: state layers of the current pass measured so far) and after each forward pass
(then `passes_done` counts it, and `layers_done` is 0). Library code never prints: the CLI
passes one that draws a bar."""


def check_model(measured: Measured, request: ProbeRequest, n_tokens: int) -> None:
    """Fail before any work when a variant is not defined for this model, or a text model has
    fewer positions than `n_tokens`."""
    measured.check_variants(request.variants)
    limit = measured.n_positions
    if not measured.takes_pixels and limit is not None and limit < n_tokens:
        raise InputError(
            f"{n_tokens} tokens exceed the context of '{measured.name}' ({limit} positions); "
            f"pass {option('n_tokens', limit)} or fewer tokens."
        )


@dataclass(frozen=True)
class Batch:
    """A checked batch of one model: what each forward pass of `measure_batch` feeds it."""

    input_ids: Tensor
    """(b, n) token ids, (b, channels, height, width) pixels, or what a module with declared
    blocks takes."""
    token_mask: Tensor | None
    """(b, n) True for real tokens (None: all real, a module with declared blocks)."""
    mask: Tensor | None
    """The (n, n) attention mask injected in every layer (None: the model's own pattern)."""
    mask_label: str
    """The mask's name in the rows: its spec, "model" or "custom"."""
    allowed: Tensor | None
    """The pattern attended with (the injected mask, causal for a decoder's own), None = every
    real pair: the edges of the attention metrics."""

    @property
    def n_samples(self) -> int:
        return self.input_ids.shape[0]


def prepare_batch(
    measured: Measured, request: ProbeRequest, input_ids: Tensor, token_mask: Tensor | None
) -> Batch:
    """The batch with the request's attention mask (built once per token count) and settings
    checked for this model."""
    n_context = None if token_mask is None else token_mask.shape[1]
    mask, label = (None, "model") if n_context is None else request.mask_for(n_context)
    settings = request.settings(request.variants[0], mask)
    measured.check_settings(settings, n_context or 0)
    allowed = causal(n_context) if mask is None and n_context and measured.causal else mask
    return Batch(input_ids, token_mask, mask, label, allowed)


MAX_TOKENS = 1024
"""Tokens per CPU forward pass when a request names no batch size: the probe's peak memory
stays under half of one forward pass with output_hidden_states (`benchmarks/bench_probe.py`)."""

DEVICE_MAX_TOKENS = 2048
"""Tokens per forward pass on an accelerator: there each pass pays its metric kernels' launches
and host syncs, so passes stay as large as before the CPU's was halved."""


def samples_per_pass(
    request: ProbeRequest, n_samples: int, n_tokens: int, device: torch.device
) -> int:
    """`request.batch_size`, else as many samples as hold `MAX_TOKENS` tokens on the CPU
    (`DEVICE_MAX_TOKENS` on an accelerator); in train mode all at once (dropout masks are drawn
    per forward pass, so a split would change them)."""
    if request.batch_size:
        return request.batch_size
    if request.train_mode:
        return n_samples
    tokens = MAX_TOKENS if device.type == "cpu" else DEVICE_MAX_TOKENS
    return max(1, tokens // n_tokens)


def measure_batch(
    measured: Measured,
    batch: Batch,
    request: ProbeRequest,
    ids: dict[str, Any],
    kept: dict[str, list[list[Tensor]]] | None = None,
    progress: Progress | None = None,
) -> list[pd.DataFrame]:
    """Per-layer rows (`ids`, variant, layer, sample, metric, value, at_floor) of every variant
    of `request` on `batch`, `samples_per_pass` samples per forward pass, in the order of one
    pass over all samples (per variant and layer: state metrics, then attention metrics, each
    over samples); with `kept`, also every layer's states per variant (chunks per layer); with
    `progress`, a call per layer group and per pass (`Progress`). The one measuring loop of the
    probe, the curves and the monitor, for every kind of model."""
    n_samples = batch.n_samples
    n_tokens = 1 if batch.token_mask is None else batch.token_mask.shape[1]
    step = samples_per_pass(request, n_samples, n_tokens, measured.device)
    n_passes, done = len(request.variants) * -(-n_samples // step), 0
    frames: list[pd.DataFrame] = []
    for variant in request.variants:
        layers = None if kept is None else kept.setdefault(variant.name, [])
        settings = request.settings(variant, batch.mask)
        passes: list[LayerMeasure] = []
        for start in range(0, n_samples, step):
            chunk = slice(start, start + step)
            token_mask = None if batch.token_mask is None else batch.token_mask[chunk]
            on_layer = LayerMeasure(
                request.state_metrics,
                request.attention_metrics,
                {**ids, "variant": variant.name},
                token_mask,
                batch.allowed,
                layers,
                on_group=None if progress is None else partial(progress, done, n_passes),
            )
            measured.run_layers(batch.input_ids[chunk], token_mask, on_layer, settings)
            on_layer.finish()
            passes.append(on_layer)
            done += 1
            if progress:
                progress(done, n_passes, 0)
        frames += LayerMeasure.frames_of(passes)
    return frames


GROUP_SEQUENCES = 24
"""Sequences (layers x samples) per metric call, to amortize each call's fixed cost at a small
price in memory (`benchmarks/bench_probe.py` measures both)."""

GROUP_VALUES = 2**21
"""At most this many state values (8 MB of float32) wait in a group, whatever
`GROUP_SEQUENCES` asks: long sequences of a wide model are measured a layer at a time."""

DEVICE_GROUP_VALUES = 2**26
"""On an accelerator a group holds up to this many values (256 MB of float32), whatever its
sequences: there a call's fixed cost is its kernel launches and one host copy, during which
the device waits (about 2 ms for the O(n d) metrics of one 32 x 512 x 896 layer on an H200,
where their kernels take 0.7 ms), and the metrics' float64 buffers are bounded apart
(`metrics._tokens.DEVICE_CHUNK_BYTES`)."""


def layers_per_call(states: Tensor, where: torch.device) -> int:
    """How many layers of `states`' shape a group holds when measured on `where`.

    Example:
        >>> states = torch.empty(32, 512, 896, device="meta")
        >>> layers_per_call(states, torch.device("cpu")), layers_per_call(states, torch.device("cuda"))
        (1, 4)
    """
    if where.type == "cpu":
        sequences = states.shape[:-2].numel()
        return max(1, min(GROUP_SEQUENCES // sequences, GROUP_VALUES // states.numel()))
    return max(1, DEVICE_GROUP_VALUES // states.numel())


@dataclass
class LayerMeasure:
    """The `on_layer` callback of one forward pass: measures each layer's states, and keeps
    its values (`measured`: per layer and kind, the layer's ids and {metric: MetricValue})
    and, when `kept` is a list, its states (a host copy) in `kept[layer]`.

    States are copied into a group of consecutive layers of one shape and measured in one
    call when the group holds `layers_per_call` layers (on the CPU `GROUP_SEQUENCES`
    sequences, at most `GROUP_VALUES` values; on an accelerator `DEVICE_GROUP_VALUES` values);
    `finish()` measures the rest, after the pass. Attention metrics are measured as each
    layer arrives. Frames are built once, after the passes (`frames_of`): a frame per layer
    and pass cost more than the metrics of a small model."""

    state_metrics: Sequence[MetricInfo]
    attention_metrics: Sequence[MetricInfo]
    ids: dict[str, Any]
    token_mask: Tensor | None
    """(b, n) True for real tokens (None: all real)."""
    allowed: Tensor | None = None
    """The (n, n) pattern attended with, for the attention metrics (None: every real pair)."""
    kept: list[list[Tensor]] | None = None
    measured: list[tuple[dict[str, Any], dict[str, MetricValue]]] = field(default_factory=list)
    on_group: Callable[[int], None] | None = None
    """Called after each group is measured with the number of layers measured so far."""
    n_measured: int = field(default=0, init=False, repr=False)
    group: Tensor | None = field(default=None, init=False, repr=False)
    """(layers, b, n, d) copies of the states waiting to be measured, in their first rows."""
    waiting: list[int] = field(default_factory=list, init=False, repr=False)
    """The index in `measured` of each layer in `group`, whose values `finish` fills in."""

    def __post_init__(self) -> None:
        mask = self.token_mask
        if mask is not None and mask.device.type == "cpu" and bool(mask.all()):
            self.token_mask = None  # no pads, known on the host: the suite need not zero any

    def __call__(self, c: LayerCapture) -> None:
        where = metrics_device(c.states.device)
        layer_ids = {**self.ids, "layer": c.layer}
        if self.state_metrics:
            self.measured.append((layer_ids, {}))  # values filled in when measured
            self.wait(c.states.detach(), where)
        if self.attention_metrics and c.attention is not None:
            probs = c.attention.to(where)
            token_mask = self.token_mask
            if token_mask is None:
                token_mask = torch.ones(probs.shape[0], probs.shape[-1], dtype=torch.bool)
            allowed = None if self.allowed is None else self.allowed.to(where)
            values = attention_values(probs, token_mask.to(where), allowed, self.attention_metrics)
            self.measured.append((layer_ids, values))
        if self.kept is not None:
            if len(self.kept) <= c.layer:
                self.kept.append([])
            self.kept[c.layer].append(c.states.detach().to("cpu", copy=True))

    def wait(self, states: Tensor, where: torch.device) -> None:
        """Copy `states`, the last layer of `measured`, into the group (the model may change
        its own tensor later), after measuring a group of another shape or dtype; measure the
        group once it is full."""
        group = self.group
        if (
            group is None
            or group.shape[1:] != states.shape
            or (group.dtype, group.device) != (states.dtype, where)
        ):
            self.finish()
            rows = layers_per_call(states, where)
            group = self.group = torch.empty(rows, *states.shape, dtype=states.dtype, device=where)
        group[len(self.waiting)].copy_(states)
        self.waiting.append(len(self.measured) - 1)
        if len(self.waiting) == len(group):
            self.measure_group()

    def finish(self) -> None:
        """Measure the states still waiting and free the group: call it after each pass."""
        self.measure_group()
        self.group = None

    def measure_group(self) -> None:
        """Measure the waiting states in one call and fill in their values."""
        if not self.waiting or self.group is None:  # a group exists while states wait
            return
        states = self.group[: len(self.waiting)]
        token_mask = None
        if self.token_mask is not None:
            token_mask = self.token_mask.to(states.device).expand(states.shape[:-1])
        values = measure_states(
            states, token_mask, metrics=tuple(self.state_metrics), source_dtype=states.dtype
        )
        for row, index in enumerate(self.waiting):
            self.measured[index][1].update(
                {name: MetricValue(v.value[row], v.at_floor[row]) for name, v in values.items()}
            )
        self.n_measured += len(self.waiting)
        self.waiting.clear()
        if self.on_group:
            self.on_group(self.n_measured)

    @staticmethod
    def frames_of(passes: Sequence[LayerMeasure]) -> list[pd.DataFrame]:
        """A frame per layer and kind (ids, layer, sample, metric, value, at_floor) of passes
        over consecutive samples, in the order of one pass over all of them: metric-major,
        then sample (each metric's values joined over the passes)."""
        if any(one.waiting for one in passes):
            raise RuntimeError("LayerMeasure.finish() was not called after a forward pass")
        frames = []
        for parts in zip(*(one.measured for one in passes), strict=True):
            layer_ids, first = parts[0]
            values = {
                name: MetricValue(
                    torch.cat([part[name].value for _, part in parts]),
                    torch.cat([part[name].at_floor for _, part in parts]),
                )
                for name in first
            }
            frames.append(metrics_frame(values, **layer_ids))
        return frames


def attention_values(
    probs: Tensor, token_mask: Tensor, allowed: Tensor | None, metrics: Sequence[MetricInfo]
) -> dict[str, Any]:
    """Attention metrics of (b, h, n, n) probabilities per sample, averaged over heads (the
    share at the floor: any head at it); pairs outside `allowed` and pads are no edges."""
    mask = token_mask[:, None, :]  # (b, 1, n): the same real tokens for every head
    edges = mask[..., None, :] & mask[..., :, None]  # (b, 1, n, n)
    if allowed is not None:
        edges = edges & allowed
    values = measure_attention(probs, mask, edges=edges, metrics=tuple(metrics))
    return {
        name: type(mv)(value=mv.value.mean(dim=1), at_floor=mv.at_floor.any(dim=1))
        for name, mv in values.items()
    }
