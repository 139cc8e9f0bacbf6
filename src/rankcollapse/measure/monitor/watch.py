"""Watch collapse while a model trains: per-layer metrics of a fixed held-out batch every
`every` steps, as tidy rows (step, layer, variant, sample, metric, value, at_floor).

`watch(model, ...)` resolves everything once (metric and variant names, the held-out batch,
the blocks) and returns a `Monitor`; the training loop calls `monitor.step(step)` after each
optimiser step (and `monitor.step(0)` before the first, to record the initialisation).

A measurement runs the model on the held-out batch under `no_grad`, in eval mode, and puts
back every module's mode and every hook afterwards; it never sees the optimiser or the
training batch. Real models go through the probe's own forward pass
(`rankcollapse.hf.run_batch`: variants as hooks, layer 0 = the embedding output, final norm
never applied); any other torch module through the same capture hooks on the blocks it
declares (`blocks="body.blocks"` or a list of modules; layer 0 = the first block's input).
Each layer's states are measured by the metric suite (`rankcollapse.metrics.measure_states`,
float64, floor flags of the model's dtype) as soon as the block has run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.devices import metrics_device
from rankcollapse.errors import ConfigError, InputError
from rankcollapse.hf import LayerCapture, LoadedModel
from rankcollapse.hf.capture import blocks_captured, modes_kept
from rankcollapse.lens import is_nnsight, unwrap_nnsight
from rankcollapse.measure.kinds import check_variants, in_memory, knows, n_positions, run_layers
from rankcollapse.measure.monitor.distributed import Ranks, check_ranks, local_module, logs_of_rank
from rankcollapse.measure.probe import ProbeInputs
from rankcollapse.metrics import get_metric, measure_states, metrics_frame
from rankcollapse.variants import Variant, parse_variant

COLUMNS = ("step", "layer", "variant", "sample", "metric", "value", "at_floor")
MONITOR_METRICS = ("res_comp_rel", "mu_rel", "stable_rank")
"""The default: two mean-centred residuals (one pass over the norms) and the stable rank."""


class Log(Protocol):
    """Where a monitor's measurements go (`MemoryLog`, `CsvLog`, `TensorBoardLog`)."""

    def resume(self, step: int) -> None:
        """The run (re)starts at `step`: what was recorded at it or later is dropped (at the
        latest when the first measurement is appended)."""

    def append(self, frame: pd.DataFrame) -> None:
        """Record one measurement (all rows of one step), whole or not at all."""


@dataclass
class Monitor:
    """Measures a model every `every` steps (built by `watch`, which checks every option)."""

    measure_fn: Callable[[int], pd.DataFrame]
    """Runs one measurement at a step and returns its tidy rows."""
    every: int
    """Measure at the steps divisible by this."""
    logs: list[Log] = field(default_factory=list)
    """Where each measurement is appended."""
    ranks: Ranks = 0
    """Under torch.distributed: the rank that measures, or "every" (per-rank logs)."""
    started: bool = False
    """Whether the first step was seen (the logs were told where the run starts)."""
    active: bool = True
    """Whether this process measures (False on the other ranks: their steps do nothing)."""

    def measure(self, step: int) -> pd.DataFrame | None:
        """Measure now, whatever the step, and append the rows to every log (None on a rank
        that does not measure)."""
        if not self.started:
            self._start(step)
        if not self.active:
            return None
        frame = self.measure_fn(step)
        for log in self.logs:
            log.append(frame)
        return frame

    def step(self, step: int) -> pd.DataFrame | None:
        """Call after each optimiser step (`step` = steps done; 0 before training): measures
        at multiples of `every` and returns the rows, else None.

        The first step a monitor sees is where its run starts: rows the logs hold at that step
        or later came from a run that was killed (or is being redone) and are dropped, so a
        resumed run records each step once.
        """
        if not self.started:
            self._start(step)
        return self.measure(step) if self.active and step % self.every == 0 else None

    def close(self) -> None:
        """Call once training ends: every log with a `close` closes (a tracker's log stores
        its table of rows and heat map, TensorBoard's event file is closed)."""
        for log in self.logs:
            close = getattr(log, "close", None)
            if close is not None:
                close()

    def _start(self, step: int) -> None:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InputError(
                f"monitor.step takes the number of steps done (an int >= 0), got "
                f"{step!r}; pass e.g. trainer.global_step."
            )
        logs = logs_of_rank(self.logs, self.ranks)  # the rank is known once training runs
        self.active, self.logs = logs is not None, logs or []
        for log in self.logs:
            log.resume(step)
        self.started = True


def watch(
    model: nn.Module | LoadedModel,
    *,
    every: int = 50,
    metrics: Sequence[str] | None = None,
    variants: Sequence[str | Variant] = ("transformer",),
    blocks: str | Sequence[nn.Module] | None = None,
    inputs: Tensor | tuple[Tensor, ...] | None = None,
    token_mask: Tensor | None = None,
    tokenizer: Any = None,
    text: str | None = None,
    random_tokens: bool = False,
    n_samples: int = 8,
    n_tokens: int = 64,
    seed: int = 0,
    logs: Sequence[Log] = (),
    ranks: Ranks = 0,
) -> Monitor:
    """A `Monitor` of `model`: resolves metrics, variants, blocks and the held-out batch once.

    Args:
        model: a Hugging Face model in memory (any family the probe knows; base model or one
            with a head), a `LoadedModel`, a TransformerLens `HookedTransformer` (its
            residual-stream hooks), an nnsight wrapper (measured as the model it wraps), a
            DDP wrapper (measured through its module), or any torch module with `blocks`.
        every: measure at steps 0, every, 2 every, ...
        metrics: state metrics of `rankcollapse.metrics.METRICS` (default `MONITOR_METRICS`).
        variants: names of `rankcollapse variants` ("san", "san+skip", ...), each a separate
            forward on the same weights (Hugging Face models; other modules: "transformer",
            the model as it is).
        blocks: for a module the probe does not know, its blocks in order: a dotted path to a
            `ModuleList` ("body.blocks") or the modules themselves. Layer 0 is the first
            block's input, layer l the output of block l (the first element of a tuple).
        inputs: the held-out batch itself: token ids (b, n) for a Hugging Face model, or
            whatever `model(inputs)` takes for a module with `blocks` (a tuple: the
            arguments of `model(*inputs)`, e.g. an Amsel grid's queries and points). None
            (models the probe knows): `n_samples` windows of `n_tokens` tokens of `text` (None: the
            built-in corpus), or random token ids with `random_tokens`, chosen by `seed`.
        token_mask: (b, n) True for real tokens of `inputs` (None: all real).
        tokenizer: the tokenizer of a Hugging Face model (None: random tokens only).
        logs: where each measurement goes (`CsvLog`, `TensorBoardLog`, `MemoryLog`,
            `rankcollapse.tracking.WandbLog` / `MLflowLog`).
        ranks: under `torch.distributed`, the rank that measures (the others' steps do
            nothing), or "every": each rank measures into its own logs (a `CsvLog`'s
            `name.rank<r>.csv`, a `TensorBoardLog`'s `rank<r>/`). A DDP wrapper is measured
            through its module, never by a collective.

    Example:
        >>> from rankcollapse.nets import ToyNet, NetConfig, random_tokens
        >>> net = ToyNet(NetConfig(n_layers=2, d_model=8, skip="on"))
        >>> monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0),
        ...                 every=10, metrics=["mu_rel"])
        >>> monitor.step(0)[["step", "layer", "metric"]].drop_duplicates().values.tolist()
        [[0, 0, 'mu_rel'], [0, 1, 'mu_rel'], [0, 2, 'mu_rel']]
        >>> monitor.step(5) is None
        True
    """
    ranks = check_ranks(ranks)
    model = local_module(model)
    if is_nnsight(model):  # measured as the model it wraps, with its tokenizer
        model, tokenizer = unwrap_nnsight(model, tokenizer)
    if isinstance(every, bool) or not isinstance(every, int) or every < 1:
        raise ConfigError(f"every must be an int >= 1 (steps between measurements), got {every!r}.")
    names = list(MONITOR_METRICS if metrics is None else metrics)
    for name in names:
        if get_metric(name).kind != "states":
            raise ConfigError(
                f"the monitor measures state metrics; '{name}' is an attention metric. Measure "
                "attention with `rankcollapse probe` on a saved checkpoint, or drop it."
            )
    if not names:
        raise ConfigError("the monitor needs at least one metric; see `rankcollapse metrics`.")
    resolved = [parse_variant(v) for v in variants]
    if not resolved:
        raise ConfigError("the monitor needs at least one variant, e.g. ['transformer'].")
    if blocks is None:
        held_out = ProbeInputs(
            text=text,
            random_tokens=random_tokens,
            n_samples=n_samples,
            n_tokens=n_tokens,
            seed=seed,
        )  # the batch drawn when `inputs` is None
        measure = _hf_measure(model, names, resolved, inputs, token_mask, tokenizer, held_out)
    else:
        measure = _module_measure(model, names, resolved, blocks, inputs, token_mask)
    return Monitor(measure, every, list(logs), ranks)


def _hf_measure(model, names, variants, inputs, token_mask, tokenizer, held_out: ProbeInputs):
    if not knows(model):
        raise ConfigError(
            f"a {type(model).__name__} is not a Hugging Face model, a HookedTransformer or an "
            "nnsight wrapper; declare its blocks, e.g. watch(model, blocks='layers', "
            "inputs=batch) (a dotted path to its ModuleList of blocks, or the block modules "
            "in order)."
        )
    loaded = in_memory(model, tokenizer=tokenizer)
    check_variants(loaded, variants)
    limit = n_positions(loaded)
    length = held_out.n_tokens if inputs is None else inputs.shape[-1]
    if limit is not None and limit < length:
        raise InputError(
            f"the held-out batch has {length} tokens but '{loaded.name}' has {limit} positions; "
            f"pass n_tokens={limit} or fewer (or shorter inputs)."
        )
    if inputs is None:
        inputs, token_mask = held_out.build(loaded)
    elif token_mask is None:
        token_mask = torch.ones(inputs.shape[:2], dtype=torch.bool)
    if token_mask.shape != inputs.shape[:2] or token_mask.dtype != torch.bool:
        raise InputError(
            f"token_mask has shape {tuple(token_mask.shape)} and dtype {token_mask.dtype} but "
            f"inputs have shape {tuple(inputs.shape)}; pass a boolean mask of shape "
            f"{tuple(inputs.shape[:2])} (True for real tokens) or none."
        )
    inputs, token_mask = inputs.cpu(), token_mask.cpu()

    def measure(step: int) -> pd.DataFrame:
        frames: list[pd.DataFrame] = []
        for variant in variants:
            on_layer = _measure_layer(frames, token_mask, names, step=step, variant=variant.name)
            run_layers(loaded, inputs, token_mask, on_layer=on_layer, variant=variant)
        return pd.concat(frames, ignore_index=True)

    return measure


def _module_measure(model, names, variants, blocks, inputs, token_mask):
    if [v.name for v in variants] != ["transformer"]:
        raise ConfigError(
            f"variants {[v.name for v in variants]} are defined for Hugging Face models only; "
            "a module with declared blocks is measured as it is (variants=['transformer'])."
        )
    if inputs is None:
        raise ConfigError(
            "a module with declared blocks needs its held-out batch: pass inputs= (what "
            "model(inputs) takes), e.g. a few sequences the model does not train on."
        )
    if isinstance(blocks, str):
        try:
            blocks = list(model.get_submodule(blocks))
        except (AttributeError, TypeError) as err:
            raise ConfigError(
                f"{type(model).__name__} has no module list at '{blocks}' ({err}); pass the "
                "dotted path of its blocks (e.g. 'layers', 'body.blocks') or the modules."
            ) from None
    blocks = list(blocks)
    if not blocks or len({id(b) for b in blocks}) != len(blocks):
        raise ConfigError(
            f"blocks must be distinct modules, in order, at least one; got {len(blocks)} "
            f"({len({id(b) for b in blocks})} distinct). A block reused at every layer is "
            "listed once."
        )
    mask = token_mask.cpu() if token_mask is not None else None
    arguments = inputs if isinstance(inputs, tuple) else (inputs,)

    def measure(step: int) -> pd.DataFrame:
        frames: list[pd.DataFrame] = []
        on_layer = _measure_layer(frames, mask, names, step=step, variant="transformer")
        device = next(model.parameters()).device
        with blocks_captured(blocks, on_layer), modes_kept(model), torch.no_grad():
            model.eval()
            model(*(x.to(device) for x in arguments))
        return pd.concat(frames, ignore_index=True)

    return measure


def _measure_layer(
    frames: list[pd.DataFrame],
    token_mask: Tensor | None,
    names: list[str],
    *,
    step: int,
    variant: str,
) -> Callable[[LayerCapture], None]:
    """The callback that measures each captured layer into `frames` (metrics float64 on the
    states' device, MPS: the CPU; floor flags of the states' dtype)."""

    def on_layer(capture: LayerCapture) -> None:
        where = metrics_device(capture.states.device)
        mask = None if token_mask is None else token_mask.to(where)
        values = measure_states(
            capture.states.to(where), mask, metrics=names, source_dtype=capture.states.dtype
        )
        frames.append(metrics_frame(values, step=step, layer=capture.layer, variant=variant))

    return on_layer
