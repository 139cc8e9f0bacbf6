"""Watch collapse while a model trains: per-layer metrics of a fixed held-out batch every
`every` steps, as tidy rows (step, layer, variant, sample, metric, value, at_floor).

`watch(model, ...)` resolves everything once (metric and variant names, the held-out batch,
the blocks) and returns a `Monitor`; the training loop calls `monitor.step(step)` after each
optimiser step (and `monitor.step(0)` before the first, to record the initialisation).

A measurement runs the model on the held-out batch under `no_grad`, in eval mode, and puts
back every module's mode and every hook afterwards; it never sees the optimiser or the
training batch. Every model goes through the probe's own loop (`measure.layers.measure_batch`)
and its kind (`measure.kinds`): real models through their hooks (variants as hooks, layer 0 =
the embedding output, final norm never applied), any other torch module through the capture
hooks on the blocks it declares (`blocks="body.blocks"` or a list of modules; layer 0 = the
first block's input).
Each layer's states are copied as soon as the block has run and measured by the metric suite
(`rankcollapse.metrics.measure_states`, float64, floor flags of the model's dtype) a few
layers at a time (`rankcollapse.measure.layers.LayerMeasure`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pandas as pd
import torch
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, InputError, RankCollapseError
from rankcollapse.hf import LayerCapture, RunSettings
from rankcollapse.lens import is_nnsight, unwrap_nnsight
from rankcollapse.measure.kinds import (
    KINDS,
    BlocksMeasured,
    Measured,
    as_measured,
    check_parameters,
)
from rankcollapse.measure.layers import Batch, check_model, measure_batch, prepare_batch
from rankcollapse.measure.monitor.distributed import Ranks, check_ranks, local_module, logs_of_rank
from rankcollapse.measure.probe import ProbeInputs
from rankcollapse.measure.request import ProbeRequest, resolve_probe
from rankcollapse.variants import Variant

COLUMNS = ("step", "layer", "variant", "sample", "metric", "value", "at_floor")
MONITOR_METRICS = ("res_comp_rel", "mu_rel", "stable_rank")
"""The default: two mean-centred residuals (one pass over the norms) and the stable rank."""


class Log(Protocol):
    """Where a monitor's measurements go (`MemoryLog`, `CsvLog`, `TensorBoardLog`). A log may
    also have `check(setup)`, which `watch` calls once: it refuses a log that holds another
    monitor setup (`setup`: metrics, variants, model, inputs; plain JSON values)."""

    def resume(self, step: int) -> None:
        """The run (re)starts at `step`: a log that already holds this monitor's steps at or
        after it refuses (nothing is replaced), unless it was made with `resume=True`, when
        they are recorded again."""

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
    last: int | None = None
    """The last step seen (None before the first: then the logs are told where the run
    starts)."""
    ranks: Ranks = 0
    """Under torch.distributed: the rank that measures, or "every" (per-rank logs)."""
    active: bool = True
    """Whether this process measures (False on the other ranks: their steps do nothing)."""

    def measure(self, step: int) -> pd.DataFrame:
        """Measure now, whatever the step (steps still only go forward), and append the rows
        to every log."""
        self._advance(step)
        return self._record(step) if self.active else None

    def step(self, step: int) -> pd.DataFrame | None:
        """Call after each optimiser step (`step` = steps done; 0 before training): measures
        at multiples of `every` and returns the rows, else None.

        `step` is an int >= 0 that only goes forward: a step equal to or before the last one
        seen is refused (InputError), nothing measured nor logged. The first step a monitor
        sees is where its run starts: a log that already holds rows at that step or later (a
        run that was killed, or is being redone) is refused with a sentence unless it was made
        with `resume=True`, so no log replaces rows it did not write.
        """
        self._advance(step)
        return self._record(step) if self.active and step % self.every == 0 else None

    def close(self) -> None:
        """Call once training ends: every log with a `close` closes (a tracker's log stores
        its table of rows and heat map, TensorBoard's event file is closed)."""
        for log in self.logs:
            close = getattr(log, "close", None)
            if close is not None:
                close()

    def _record(self, step: int) -> pd.DataFrame:
        frame = self.measure_fn(step)
        for log in self.logs:
            log.append(frame)
        return frame

    def _advance(self, step: int) -> None:
        """Check `step` (every call) and, at the first, tell the logs where the run starts."""
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise InputError(
                f"monitor.step takes the number of steps done (an int >= 0), got "
                f"{step!r} ({type(step).__name__}); pass e.g. trainer.global_step."
            )
        if self.last is not None and step <= self.last:
            raise InputError(
                f"monitor.step({step}) comes after step {self.last}: steps only go forward, "
                "each recorded once (nothing was measured). Call it once per optimiser step "
                "with the steps done; a run restarted from a checkpoint gets a new monitor, "
                "watch(...) again, with logs made with resume=True to record its steps again."
            )
        if self.last is None:
            logs = logs_of_rank(self.logs, self.ranks)  # the rank is known once training runs
            self.active, self.logs = logs is not None, logs or []
            for log in self.logs:
                log.resume(step)
        self.last = step


def watch(
    model: nn.Module | Measured | Any,
    *,
    every: int = 50,
    metrics: str | Sequence[str] | None = None,
    variants: str | Sequence[str | Variant] = ("transformer",),
    blocks: str | Sequence[nn.Module] | None = None,
    inputs: Tensor | None = None,
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
            with a head), a `LoadedModel`, a TransformerLens `HookedTransformer` or
            `TransformerBridge` (its residual-stream hooks), an nnsight wrapper (the model it
            wraps), a DDP wrapper (its module), or any torch module together with `blocks`.
        every: measure at steps 0, every, 2 every, ...
        metrics: metric names of `rankcollapse.metrics.METRICS`, a list or "a,b" (default
            `MONITOR_METRICS`); attention metrics for a Hugging Face model (averaged over
            heads, as the probe does).
        variants: names of `rankcollapse variants` ("san", "san+skip", ...), each a separate
            forward on the same weights (Hugging Face models; other modules: "transformer",
            the model as it is).
        blocks: for a module the probe does not know, its blocks in order: a dotted path to a
            `ModuleList` ("body.blocks") or the modules themselves. Layer 0 is the first
            block's input, layer l the output of block l (the first element of a tuple).
        inputs: the held-out batch itself: token ids (b, n) for a Hugging Face model, or
            whatever `model(inputs)` takes for a module with `blocks`. None (Hugging Face
            models only): `n_samples` windows of `n_tokens` tokens of `text` (None: the
            built-in corpus), or random token ids with `random_tokens`, chosen by `seed`.
        token_mask: (b, n) True for real tokens of `inputs` (None: all real).
        tokenizer: the tokenizer of a Hugging Face model (None: random tokens only).
        logs: where each measurement goes (`CsvLog`, `TensorBoardLog`, `MemoryLog`,
            `rankcollapse.tracking.WandbLog` / `MLflowLog`), a list.
        ranks: under `torch.distributed`, the rank that measures (the others' steps do
            nothing), or "every": each rank measures into its own logs (a `CsvLog`'s
            `name.rank<r>.csv`, a `TensorBoardLog`'s `rank<r>/`). A DDP wrapper is measured
            through its module, never by a collective.

    Everything is checked here, once: a bad option, block, batch or log raises a
    `RankCollapseError` naming it; a module with declared blocks runs one forward pass of
    the held-out batch here, to check that every block runs once and gives states.

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
    check_scalars(every=every, n_samples=n_samples, n_tokens=n_tokens, seed=seed)
    ranks = check_ranks(ranks)
    model, tokenizer = _unwrapped(model, tokenizer)
    request = resolve_probe(variants, None, MONITOR_METRICS if metrics is None else metrics)
    logs = checked_logs(logs)
    if blocks is None:
        # the batch drawn when `inputs` is None
        held_out = ProbeInputs(
            text, random_tokens, n_samples=n_samples, n_tokens=n_tokens, seed=seed
        )
        measured, batch, found = _known_batch(
            model, request, inputs, token_mask, tokenizer, held_out
        )
    else:
        measured, batch, found = _blocks_batch(model, request, blocks, inputs, token_mask)
        request = replace(request, batch_size=batch.n_samples)  # one pass, as the model runs
    _check_log_setups(logs, request, found)
    return Monitor(functools.partial(_measure, measured, batch, request), every, logs, ranks=ranks)


def _measure(measured: Measured, batch: Batch, request: ProbeRequest, step: int) -> pd.DataFrame:
    """One measurement of the held-out batch at `step`: the probe's loop (`measure_batch`)."""
    frames = measure_batch(measured, batch, request, {"step": step})
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def _unwrapped(model: Any, tokenizer: Any) -> tuple[Any, Any]:
    """The module a DDP wrapper holds; the model an nnsight wrapper holds, with its tokenizer."""
    model = local_module(model)
    if is_nnsight(model):  # measured as the model it wraps, with its tokenizer
        model, tokenizer = unwrap_nnsight(model, tokenizer)
    return model, tokenizer


def _check_log_setups(logs: list[Log], request: ProbeRequest, found: dict[str, Any]) -> None:
    """Each log with `check(setup)` refuses to hold this monitor's rows if it holds another
    setup's (metrics, variants, and the model and inputs `found`)."""
    setup = {"metrics": list(request.names), "variants": [v.name for v in request.variants]}
    for log in logs:
        check = getattr(log, "check", None)
        if callable(check):
            check({**setup, **found})


def check_scalars(**values: Any) -> None:
    """Each value an int (not a bool): `every`, `n_samples` >= 1, `n_tokens` >= 2, `seed` >= 0."""
    least = {"every": 1, "n_samples": 1, "n_tokens": 2, "seed": 0}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < least[name]:
            raise ConfigError(
                f"{name} must be an int >= {least[name]}, got {value!r}"
                + (" (steps between measurements)." if name == "every" else ".")
            )


def checked_logs(logs: Any) -> list[Log]:
    """`logs` as a list, each with `resume(step)` and `append(frame)`."""

    def is_log(log: Any) -> bool:
        return callable(getattr(log, "resume", None)) and callable(getattr(log, "append", None))

    if isinstance(logs, (str, bytes, os.PathLike)) or is_log(logs):
        raise ConfigError(
            f"logs takes a list of logs, got {logs!r}; write e.g. logs=[CsvLog('collapse.csv')]."
        )
    try:
        found = list(logs)
    except TypeError:
        raise ConfigError(
            f"logs takes a list of logs, got a {type(logs).__name__}; write e.g. "
            "logs=[CsvLog('collapse.csv')]."
        ) from None
    for k, log in enumerate(found):
        if not is_log(log):
            raise ConfigError(
                f"logs[{k}] is {log!r}, not a log (an object with resume(step) and "
                "append(frame)): MemoryLog(), CsvLog(path), TensorBoardLog(folder)."
            )
    return found


def digest(*tensors: Tensor | None) -> str:
    """sha256 of the tensors' dtypes, shapes and bytes: names the held-out batch in a setup."""
    h = hashlib.sha256()
    for x in tensors:
        if x is None:
            h.update(b"none")
            continue
        x = x.detach().cpu().contiguous()
        h.update(json.dumps([str(x.dtype), list(x.shape)]).encode())
        h.update(x.reshape(-1).view(torch.uint8).numpy().tobytes())  # host
    return h.hexdigest()


def _known_batch(
    model: Any, request: ProbeRequest, inputs: Any, token_mask: Any, tokenizer: Any, held_out
) -> tuple[Measured, Batch, dict[str, Any]]:
    """A model of a kind the probe knows (`as_measured`: checked that it can run), its checked
    held-out batch (the user's `inputs` or one drawn from `held_out`) and its part of the
    setup."""
    if isinstance(model, nn.Module) and not any(kind.accepts(model) for kind in KINDS):
        raise ConfigError(
            f"a {type(model).__name__} is not a Hugging Face model, a TransformerLens model or "
            "an nnsight wrapper; declare its blocks, e.g. watch(model, blocks='layers', "
            "inputs=batch) (a dotted path to its ModuleList of blocks, or the block modules "
            "in order)."
        )
    measured = as_measured(model, tokenizer=tokenizer)
    if inputs is not None or token_mask is not None:
        held_out = ProbeInputs(tokens=inputs, token_mask=token_mask, tokens_name="inputs")
    check_model(measured, request, held_out.n_tokens)
    batch = prepare_batch(measured, request, *held_out.build(measured))
    config = getattr(measured.model, "config", None) or getattr(measured.model, "cfg", None)
    setup = {
        "model": {
            "class": type(measured.model).__name__,
            "name": measured.name,
            "n_layers": measured.n_layers,
            "d_model": getattr(config, "hidden_size", getattr(config, "d_model", None)),
        },
        "inputs": {
            "shape": list(batch.input_ids.shape),
            "sha256": digest(batch.input_ids, batch.token_mask),
        },
    }
    return measured, batch, setup


def _blocks_batch(
    model: Any, request: ProbeRequest, blocks: Any, inputs: Any, token_mask: Any
) -> tuple[Measured, Batch, dict[str, Any]]:
    """Any module measured through the capture hooks on its declared blocks (one forward pass
    here checks them), its held-out batch and its part of the setup."""
    if not isinstance(inputs, Tensor):
        raise ConfigError(
            "a module with declared blocks needs its held-out batch as a torch.Tensor: pass "
            "inputs= (what model(inputs) takes), e.g. a few sequences the model does not "
            f"train on; got {type(inputs).__name__}."
        )
    if token_mask is not None and (
        not isinstance(token_mask, Tensor) or token_mask.dtype != torch.bool
    ):
        raise InputError(
            f"token_mask must be a boolean torch.Tensor (b, n), True for real tokens, got "
            f"{getattr(token_mask, 'dtype', type(token_mask).__name__)}; or pass none."
        )
    measured = BlocksMeasured(model, module_blocks(model, blocks))
    check_parameters(model, needed=False)
    measured.check_variants(request.variants)
    mask = None if token_mask is None else token_mask.cpu()
    batch = prepare_batch(measured, request, inputs, mask)
    _dry_run(measured, inputs, mask)
    setup = {
        "model": {"class": type(model).__name__, "n_blocks": measured.n_layers},
        "inputs": {"shape": list(inputs.shape), "sha256": digest(inputs, mask)},
    }
    return measured, batch, setup


def module_blocks(model: Any, blocks: Any) -> list[nn.Module]:
    """The declared blocks of `model`: distinct modules of it, in order, at least one."""
    if not isinstance(model, nn.Module):
        raise ConfigError(
            f"model must be a torch module (nn.Module), got a {type(model).__name__}."
        )
    path = blocks if isinstance(blocks, str) else None
    if path is not None:
        try:
            blocks = model.get_submodule(path)
        except (AttributeError, TypeError) as err:
            raise ConfigError(
                f"{type(model).__name__} has no module list at '{path}' ({err}); pass the "
                "dotted path of its blocks (e.g. 'layers', 'body.blocks') or the modules."
            ) from None
    try:
        blocks = list(blocks)
    except TypeError:
        where = f"at '{path}' is a" if path is not None else "blocks is a"
        raise ConfigError(
            f"{type(model).__name__}: {where} {type(blocks).__name__}, not a list of blocks; "
            "pass the dotted path of a ModuleList (e.g. 'layers') or the modules in order."
        ) from None
    odd = [k for k, b in enumerate(blocks) if not isinstance(b, nn.Module)]
    if odd:
        raise ConfigError(
            f"blocks[{odd[0]}] is {blocks[odd[0]]!r}, not a module; pass the block modules in "
            "order or the dotted path of their ModuleList."
        )
    if not blocks or len({id(b) for b in blocks}) != len(blocks):
        raise ConfigError(
            f"blocks must be distinct modules, in order, at least one; got {len(blocks)} "
            f"({len({id(b) for b in blocks})} distinct). A block reused at every layer is "
            "listed once."
        )
    own = {id(m) for m in model.modules()}
    outside = [k for k, b in enumerate(blocks) if id(b) not in own]
    if outside:
        raise ConfigError(
            f"blocks[{outside[0]}] (a {type(blocks[outside[0]]).__name__}) is not a module of "
            f"this {type(model).__name__}; pass blocks of the model being watched, e.g. "
            "blocks='layers'."
        )
    return blocks


def _dry_run(measured: BlocksMeasured, inputs: Tensor, mask: Tensor | None) -> None:
    """One forward pass at watch(): the held-out batch runs, each block once, and every
    layer is a float tensor (b, n, d) matching `mask`; else a clear error."""
    model, blocks = measured.model, measured.blocks
    seen: list[int] = []

    def check(c: LayerCapture) -> None:
        block = blocks[min(c.layer, len(blocks)) - 1]
        where = f"layer {c.layer} (" + (
            "the first block's input)"
            if c.layer == 0
            else f"the output of blocks[{c.layer - 1}], a {type(block).__name__})"
        )
        x = c.states
        if not isinstance(x, Tensor):
            raise InputError(
                f"{where} is a {type(x).__name__}, not a tensor of states (b, n, d); declare "
                "as blocks the modules whose output is the residual stream (a tensor, or a "
                "tuple whose first element is one)."
            )
        if x.ndim != 3 or not x.is_floating_point():
            raise InputError(
                f"{where} has shape {tuple(x.shape)} and dtype {x.dtype}, not float states "
                "(b, n, d); declare as blocks the modules whose output is the residual stream."
            )
        if mask is not None and tuple(x.shape[:2]) != tuple(mask.shape):
            raise InputError(
                f"token_mask has shape {tuple(mask.shape)} but {where} has (b, n) = "
                f"{tuple(x.shape[:2])}; pass a boolean mask of that shape, or none."
            )
        seen.append(c.layer)

    try:
        measured.run_layers(inputs, mask, check, RunSettings())
    except RankCollapseError:
        raise
    except Exception as err:  # noqa: BLE001 - the user's model on the user's batch
        raise InputError(
            f"the held-out batch does not run through the {type(model).__name__} "
            f"({type(err).__name__}: {err}); pass inputs= that model(inputs) takes."
        ) from None
    if seen != list(range(len(blocks) + 1)):
        raise ConfigError(
            f"a forward pass of the held-out batch gave layers {seen[:10]} from "
            f"{len(blocks)} blocks, not each block once in order; declare the blocks the "
            "model runs once each, in order (a block reused at every layer is listed once)."
        )
