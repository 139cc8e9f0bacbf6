"""A plain training loop (Adam, seeded, deterministic on CPU) and config-keyed checkpoint stores.

Training is a pure function of its inputs: the model's initial weights (seeded by its own
config), the data and `TrainConfig`. A checkpoint is therefore keyed by the hash of everything
that determines it (`checkpoint_key`), and a store hands a checkpoint back only under that key
and only if the full config stored beside it is equal to the one asked for: a model trained with
other settings is never reused silently.

Stores: `MemoryStore` (a dict, for one process and tests) and `DirectoryStore` (one `.pt` file per
key in a folder the caller chooses, written atomically). The training loop itself touches no file;
a store is passed in by whoever owns the disk (the runner, a CLI, a notebook).
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from rankcollapse.errors import ConfigError, InputError
from rankcollapse.files import canonical_json, write_atomic
from rankcollapse.reading import MiB, checked_size
from rankcollapse.seeds import Seed
from rankcollapse.sizes import BatchSize

if TYPE_CHECKING:  # the monitor imports the real-model code; a toy run never needs it
    from rankcollapse.measure.monitor import Monitor


class TrainConfig(BaseModel):
    """How a model is trained."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=1000, ge=0)  # default=: a default to mypy too
    """Adam steps (one mini-batch each)."""
    batch_size: BatchSize = 64
    """Sequences per mini-batch (capped at the data size)."""
    lr: float = Field(default=1e-3, gt=0)
    """Adam learning rate (the peak one under a schedule)."""
    schedule: Literal["constant", "cosine"] = "constant"
    """After a linear warm-up over `warmup` steps: constant `lr`, or cosine decay towards 0
    (`warmup_cosine`)."""
    warmup: int = Field(default=0, ge=0)
    """Linear warm-up steps (0: none)."""
    seed: Seed = 0
    """Seeds the order of the mini-batches."""
    loss: Literal["cross_entropy", "mse"] = "cross_entropy"
    """Per-token cross-entropy on class labels, or mean squared error on real targets."""

    def key_fields(self) -> dict[str, Any]:
        """The fields that determine the training, for a checkpoint key: all of them, less the
        schedule's when the rate is constant throughout (keys made before it existed match)."""
        constant = self.schedule == "constant" and self.warmup == 0
        return self.model_dump(exclude={"schedule", "warmup"} if constant else None)

    def lr_at(self, step: int) -> float:
        """The learning rate of step `step` (0-based) of `steps`."""
        if self.schedule == "cosine":
            return warmup_cosine(self.lr, step, self.steps, self.warmup)
        return self.lr * min(1.0, (step + 1) / self.warmup) if self.warmup else self.lr


def train(
    model: nn.Module,
    inputs: Tensor,
    targets: Tensor,
    config: TrainConfig,
    *,
    device: torch.device | str = "cpu",
    monitor: Monitor | None = None,
) -> list[float]:
    """Train `model` in place with Adam on mini-batches; return the loss of every step.

    The learning rate follows `config.schedule` (constant, or warm-up then cosine decay).

    `model(inputs[batch])` must return logits `(b, n, n_classes)` for "cross_entropy" (targets:
    long class labels `(b, n)`) or predictions shaped like `targets` for "mse". Mini-batches run
    through the data in a seeded random order, epoch after epoch, with no per-example loops.
    The model and the data move to `device` (the model stays there); the batch order is drawn
    on the CPU, so it is the same on every device, and moves there once per epoch; the host
    reads the losses once, at the end. Dropout and any other draw from torch's global generator
    are seeded by `config.seed` inside a fork of it (the caller's state is restored). A
    `monitor` (`rankcollapse.measure.monitor.watch`) measures the model before the first step
    and after each step its interval divides.

    Example:
        >>> model = nn.Linear(1, 2)
        >>> x, y = torch.randn(32, 4, 1), torch.zeros(32, 4, dtype=torch.long)
        >>> losses = train(model, x, y, TrainConfig(steps=50, lr=0.1))
        >>> losses[-1] < losses[0]
        True
    """
    if len(inputs) != len(targets) or len(inputs) == 0:
        raise InputError(
            f"inputs and targets must hold the same non-zero number of sequences, got "
            f"{len(inputs)} and {len(targets)}."
        )
    device = torch.device(device)
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    generator = torch.Generator().manual_seed(config.seed)
    batch_size = min(config.batch_size, len(inputs))
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    loss_fn = loss_function(config.loss)
    order = torch.empty(0, dtype=torch.long, device=device)
    losses = []
    model.train()
    if monitor is not None:
        monitor.step(0)
    # Dropout draws from torch's global generator: seeded here, inside a fork that restores the
    # caller's state afterwards, so a model with dropout trains the same way every time.
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(config.seed)
        for step in range(1, config.steps + 1):
            if len(order) < batch_size:  # a new epoch: reshuffle
                order = torch.randperm(len(inputs), generator=generator).to(device)
            batch, order = order[:batch_size], order[batch_size:]
            for group in optimizer.param_groups:
                group["lr"] = config.lr_at(step - 1)
            loss = loss_fn(model(inputs[batch]), targets[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
            if monitor is not None:
                monitor.step(step)
    model.eval()
    return torch.stack(losses).tolist() if losses else []


def warmup_cosine(lr: float, step: int, steps: int, warmup: int) -> float:
    """The learning rate at `step` (0-based) of `steps`: linear warm-up over `warmup` steps,
    then cosine decay from `lr` towards 0 (reached at step `steps`, one past the last).

    Example:
        >>> [round(warmup_cosine(1.0, s, 6, 2), 3) for s in range(6)]
        [0.5, 1.0, 1.0, 0.854, 0.5, 0.146]
    """
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(steps - warmup, 1)
    return lr * 0.5 * (1 + math.cos(math.pi * progress))


def loss_function(loss: Literal["cross_entropy", "mse"]) -> Callable[[Tensor, Tensor], Tensor]:
    """The mean loss of one batch that `TrainConfig.loss` names (per-token cross-entropy on
    class labels, or the mean squared error)."""
    return _cross_entropy if loss == "cross_entropy" else nn.functional.mse_loss


def _cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def checkpoint_key(config: Mapping[str, Any], *tensors: Tensor) -> str:
    """A short hash of a JSON-able config and the bytes of the given tensors (e.g. the data).

    Example:
        >>> checkpoint_key({"lr": 0.1}) == checkpoint_key({"lr": 0.1})
        True
        >>> checkpoint_key({"lr": 0.1}) == checkpoint_key({"lr": 0.2})
        False
    """
    digest = hashlib.sha256(canonical_json(config).encode())
    for tensor in tensors:
        digest.update(str((tuple(tensor.shape), str(tensor.dtype))).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:20]


class CheckpointStore(Protocol):
    """Where trained weights are kept between runs, keyed by `checkpoint_key`."""

    def load(self, key: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
        """The checkpoint stored under `key` for exactly this `config`, else None."""

    def save(self, key: str, config: Mapping[str, Any], checkpoint: dict[str, Any]) -> None:
        """Store `checkpoint` (state dict, losses, ...) under `key`, with its full `config`."""


class MemoryStore:
    """A checkpoint store in a dict (one process). Example:

    >>> store = MemoryStore()
    >>> store.save("k", {"lr": 0.1}, {"losses": [1.0]})
    >>> store.load("k", {"lr": 0.1}), store.load("k", {"lr": 0.2})
    ({'losses': [1.0]}, None)
    """

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, dict[str, Any]]] = {}

    def load(self, key: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
        stored = self.entries.get(key)
        if stored is None or stored[0] != canonical_json(config):
            return None
        return stored[1]

    def save(self, key: str, config: Mapping[str, Any], checkpoint: dict[str, Any]) -> None:
        self.entries[key] = (canonical_json(config), checkpoint)


MAX_CHECKPOINT_BYTES = 16 * 1024 * MiB  # the project's nets are megabytes; 16 GiB is not one


class DirectoryStore:
    """A checkpoint store in a folder: `<root>/<key>.pt` holding the config and the checkpoint.

    Written to a temporary file and renamed, so a killed run never leaves half a checkpoint.
    A file whose stored config differs from the one asked for, or that cannot be read, is
    ignored (and overwritten by the next save).
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)

    def load(self, key: str, config: Mapping[str, Any]) -> dict[str, Any] | None:
        path = self.root / f"{key}.pt"
        try:
            checked_size(path, MAX_CHECKPOINT_BYTES)  # missing, a FIFO (never opened), huge
            stored = torch.load(path, map_location="cpu", weights_only=True)
        except (InputError, RuntimeError, EOFError, OSError, pickle.UnpicklingError):  # a miss
            return None
        if stored.get("config") != canonical_json(config):
            return None
        return stored["checkpoint"]

    def save(self, key: str, config: Mapping[str, Any], checkpoint: dict[str, Any]) -> None:
        buffer = io.BytesIO()
        torch.save({"config": canonical_json(config), "checkpoint": checkpoint}, buffer)
        write_atomic(self.root / f"{key}.pt", buffer.getvalue())


def check_store(store: object) -> None:
    """Raise ConfigError unless `store` has the `load` and `save` methods of a CheckpointStore."""
    if store is not None and not all(callable(getattr(store, m, None)) for m in ("load", "save")):
        raise ConfigError(
            f"store must be a checkpoint store with load(key, config) and save(key, config, "
            f"checkpoint), e.g. MemoryStore() or DirectoryStore(path); got {type(store).__name__}."
        )
