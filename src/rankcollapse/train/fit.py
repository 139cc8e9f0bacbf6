"""Train a model once: keyed in a checkpoint store by everything that determines its weights.

`train_model` runs `rankcollapse.train.loop.train` on a freshly built model, or loads the
weights stored under the same full config (model config with its seed, training config, data
bytes, device type), so the same settings reuse the weights and other settings never do.
`train_on_task` does it for the SAN of one task of Dong et al. 2021, Sec. 5 (`TaskSetup`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator
from torch import Tensor, nn

from rankcollapse.nets import SAN
from rankcollapse.seeds import stream_seed
from rankcollapse.sizes import BatchSize, DModel, NHeads, NLayers, NTokens
from rankcollapse.tasks import TaskData, san_config, train_and_eval_data
from rankcollapse.train.loop import CheckpointStore, TrainConfig, check_store, checkpoint_key, train
from rankcollapse.train.stacked import train_stacked

if TYPE_CHECKING:
    from rankcollapse.measure.monitor import Monitor

M = TypeVar("M", bound=nn.Module)


@dataclass
class TrainedModel(Generic[M]):
    """A trained model, its per-step training losses, and whether it came from the store."""

    model: M
    losses: list[float]
    reused: bool
    key: str

    def stats(self) -> dict[str, float]:
        """final_loss (mean over the last 5% of steps, NaN without steps), reused_checkpoint."""
        last = self.losses[-max(1, len(self.losses) // 20) :] or [float("nan")]
        return {"final_loss": float(np.mean(last)), "reused_checkpoint": float(self.reused)}


def train_model(
    model: M,
    model_config: dict[str, Any],
    inputs: Tensor,
    targets: Tensor,
    train_config: TrainConfig,
    *,
    store: CheckpointStore | None = None,
    device: torch.device | str = "cpu",
    monitor: Monitor | None = None,
) -> TrainedModel[M]:
    """Train `model` (built from `model_config`) on the data, or load it from `store`.

    The checkpoint key covers everything that determines the weights: `model_config` (which must
    describe the model completely, seed included), `train_config`, the data's bytes and the
    device type (an accelerator's float arithmetic differs from the CPU's). A stored checkpoint
    is used only when its full config is equal to this one. The model ends on `device`. A
    `monitor` (`rankcollapse.measure.monitor.watch`) records the training; a reused checkpoint trains
    nothing, so it records nothing.

    Example:
        >>> from rankcollapse.nets import SAN, SANConfig
        >>> from rankcollapse.train.loop import MemoryStore
        >>> config = SANConfig(inputs="points", n_classes=2, n_layers=1, d_model=4)
        >>> x, y = torch.randn(8, 5, 2), torch.randint(2, (8, 5))
        >>> store = MemoryStore()
        >>> first = train_model(SAN(config), config.model_dump(), x, y, TrainConfig(steps=2),
        ...                     store=store)
        >>> again = train_model(SAN(config), config.model_dump(), x, y, TrainConfig(steps=2),
        ...                     store=store)
        >>> first.reused, again.reused, first.losses == again.losses
        (False, True, True)
    """
    check_store(store)
    device = torch.device(device)
    full_config = _full_config(
        model, model_config, train_config, data=checkpoint_key({}, inputs, targets), device=device
    )
    key = checkpoint_key(full_config)
    stored = _load(store, key, full_config, model, device)
    if stored is not None:
        return stored
    losses = train(model, inputs, targets, train_config, device=device, monitor=monitor)
    _save(store, key, full_config, model, losses)
    return TrainedModel(model, losses, False, key)


def train_models(
    models: Sequence[nn.Module],
    model_configs: Sequence[dict[str, Any]],
    inputs: Tensor,
    targets: Tensor,
    train_configs: Sequence[TrainConfig],
    *,
    store: CheckpointStore | None = None,
    device: torch.device | str = "cpu",
) -> list[TrainedModel]:
    """`train_model` of each model (one architecture; configs equal but for the seed), those
    not in `store` trained together as one batched model (`train.stacked.train_stacked`):
    each ends where it ends alone up to float rounding, and is stored under the key
    `train_model` gives it.

    Example:
        >>> from rankcollapse.nets import CircleNet
        >>> nets = [CircleNet("san", d_model=4, seed=s) for s in (0, 1)]
        >>> x = torch.randn(8, 2, 2)
        >>> configs = [TrainConfig(steps=3, loss="mse", seed=s) for s in (0, 1)]
        >>> trained = train_models(nets, [{"seed": 0}, {"seed": 1}], x, x, configs)
        >>> [len(t.losses) for t in trained]
        [3, 3]
    """
    check_store(store)
    device = torch.device(device)
    data = checkpoint_key({}, inputs, targets)
    full = [
        _full_config(m, c, t, data=data, device=device)
        for m, c, t in zip(models, model_configs, train_configs, strict=True)
    ]
    keys = [checkpoint_key(config) for config in full]
    trained = [
        _load(store, key, config, model, device)
        for key, config, model in zip(keys, full, models, strict=True)
    ]
    todo = [i for i, done in enumerate(trained) if done is None]
    if todo:
        losses = train_stacked(
            [models[i] for i in todo],
            inputs,
            targets,
            [train_configs[i] for i in todo],
            device=device,
        )
        for i, run in zip(todo, losses, strict=True):
            _save(store, keys[i], full[i], models[i], run)
            trained[i] = TrainedModel(models[i], run, False, keys[i])
    return [t for t in trained if t is not None]


def _full_config(
    model: nn.Module,
    model_config: dict[str, Any],
    train_config: TrainConfig,
    *,
    data: str,
    device: torch.device,
) -> dict[str, Any]:
    """Everything that determines a model's trained weights (its checkpoint's config)."""
    return {
        "model": {"class": type(model).__name__, **model_config},
        "train": train_config.key_fields(),
        "data": data,
        "device": device.type,
    }


def _load(
    store: CheckpointStore | None,
    key: str,
    full_config: dict[str, Any],
    model: nn.Module,
    device: torch.device,
) -> TrainedModel | None:
    """The model with the weights stored under `key` for exactly `full_config`, else None."""
    stored = store.load(key, full_config) if store is not None else None
    if stored is None:
        return None
    model.load_state_dict(stored["state"])
    model.to(device).eval()
    return TrainedModel(model, list(stored["losses"]), True, key)


def _save(
    store: CheckpointStore | None,
    key: str,
    full_config: dict[str, Any],
    model: nn.Module,
    losses: list[float],
) -> None:
    if store is not None:
        state = {name: value.detach().cpu().clone() for name, value in model.state_dict().items()}
        store.save(key, full_config, {"state": state, "losses": losses})


class TaskSetup(BaseModel):
    """Data, network and training of one task of Dong et al. 2021, Sec. 5."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    n_train: int = Field(ge=1)
    """Training sequences (memorization: the windows to memorise)."""
    n_eval: int = Field(ge=1)
    """Evaluation sequences: fresh ones (memorization: the first n_eval training windows)."""
    n_tokens: NTokens = Field(ge=3)
    """Tokens per sequence (sorting length, points per set, tokens per text window)."""
    n_layers: NLayers = 6
    """SAN layers (L)."""
    n_heads: NHeads = 2
    """Heads per layer (H)."""
    d_model: DModel = Field(48, ge=2)
    """Width of the SAN."""
    steps: int = Field(ge=0)
    """Adam steps."""
    batch_size: BatchSize = 64
    """Sequences per step."""
    lr: float = Field(1e-3, gt=0)
    """Adam learning rate."""
    dropout: float = Field(0.1, ge=0, lt=1)
    """Training-time dropout in the authors' four places (embedding, attention probabilities,
    attention output, classifier input); off at evaluation. 0: none."""

    @model_validator(mode="after")
    def _width_splits_into_heads(self) -> TaskSetup:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; pick a "
                "width that splits evenly into heads"
            )
        return self


def train_on_task(
    task: str,
    setup: TaskSetup,
    *,
    seed: int,
    store: CheckpointStore | None = None,
    device: torch.device | str = "cpu",
    monitor: Callable[[SAN], Monitor] | None = None,
) -> tuple[TrainedModel[SAN], TaskData]:
    """Train the SAN of `task` (`rankcollapse.tasks.san_config`) as `setup` says.

    `monitor` (`rankcollapse.measure.monitor.watch`) is called with the SAN once it is built,
    e.g. `lambda san: watch(san, blocks="body.blocks", inputs=ids, logs=...)`; it measures the
    training as `train` says (a checkpoint reused from `store` trains nothing, so it records
    nothing), and is closed at the end.

    Weights come from the "weights" stream of `seed`; the data and the batch order from its
    "data" stream (`rankcollapse.seeds.stream_seed`). Returns the trained model and the
    evaluation data (`rankcollapse.tasks.train_and_eval_data`).

    Example:
        >>> setup = TaskSetup(n_train=8, n_eval=4, n_tokens=5, n_layers=1, d_model=4, steps=2)
        >>> trained, held_out = train_on_task("sorting", setup, seed=0)
        >>> len(trained.losses), held_out.inputs.shape
        (2, torch.Size([4, 5]))
    """
    data_seed = stream_seed(seed, "data")
    train_data, held_out = train_and_eval_data(
        task, setup.n_train, setup.n_eval, seed=data_seed, n_tokens=setup.n_tokens
    )
    sizes = setup.model_dump(include={"n_layers", "n_heads", "d_model", "dropout"})
    config = san_config(train_data, **sizes, seed=stream_seed(seed, "weights"))
    schedule = TrainConfig(
        **setup.model_dump(include={"steps", "batch_size", "lr"}), seed=data_seed
    )
    model = SAN(config)
    watching = monitor(model) if monitor is not None else None
    trained = train_model(
        model,
        config.model_dump(),
        train_data.inputs,
        train_data.targets,
        schedule,
        store=store,
        device=device,
        monitor=watching,
    )
    if watching is not None:
        watching.close()
    return trained, held_out
