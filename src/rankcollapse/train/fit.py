"""Train a model once: keyed in a checkpoint store by everything that determines its weights.

`train_model` runs `rankcollapse.train.loop.train` on a freshly built model, or loads the
weights stored under the same full config (model config with its seed, training config, data
bytes, device type), so the same settings reuse the weights and other settings never do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from rankcollapse.train.loop import CheckpointStore, TrainConfig, check_store, checkpoint_key, train


@dataclass
class TrainedModel:
    """A trained model, its per-step training losses, and whether it came from the store."""

    model: nn.Module
    losses: list[float]
    reused: bool
    key: str


def train_model(
    model: nn.Module,
    model_config: dict[str, Any],
    inputs: Tensor,
    targets: Tensor,
    train_config: TrainConfig,
    *,
    store: CheckpointStore | None = None,
    device: torch.device | str = "cpu",
) -> TrainedModel:
    """Train `model` (built from `model_config`) on the data, or load it from `store`.

    The checkpoint key covers everything that determines the weights: `model_config` (which must
    describe the model completely, seed included), `train_config`, the data's bytes and the
    device type (an accelerator's float arithmetic differs from the CPU's). A stored checkpoint
    is used only when its full config is equal to this one. The model ends on `device`.

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
    full_config = {
        "model": {"class": type(model).__name__, **model_config},
        "train": train_config.model_dump(),
        "data": checkpoint_key({}, inputs, targets),
        "device": device.type,
    }
    key = checkpoint_key(full_config)
    stored = store.load(key, full_config) if store is not None else None
    if stored is not None:
        model.load_state_dict(stored["state"])
        model.to(device).eval()
        return TrainedModel(model, list(stored["losses"]), True, key)
    losses = train(model, inputs, targets, train_config, device=device)
    if store is not None:
        state = {name: value.detach().cpu().clone() for name, value in model.state_dict().items()}
        store.save(key, full_config, {"state": state, "losses": losses})
    return TrainedModel(model, losses, False, key)
