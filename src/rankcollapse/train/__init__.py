"""Training loops for the learning experiments."""

from rankcollapse.train.grid import (
    GridPoint,
    GridResult,
    TrainSettings,
    train_encoder,
    train_grid,
    train_one_by_one,
)
from rankcollapse.train.loop import (
    CheckpointStore,
    DirectoryStore,
    MemoryStore,
    TrainConfig,
    checkpoint_key,
    train,
)
from rankcollapse.train.san import (
    SAN,
    CircleNet,
    SANConfig,
    TrainedModel,
    accuracy,
    train_model,
)

__all__ = [
    "GridPoint",
    "GridResult",
    "TrainSettings",
    "train_encoder",
    "train_grid",
    "train_one_by_one",
    "SAN",
    "CheckpointStore",
    "CircleNet",
    "DirectoryStore",
    "MemoryStore",
    "SANConfig",
    "TrainConfig",
    "TrainedModel",
    "accuracy",
    "checkpoint_key",
    "train",
    "train_model",
]
