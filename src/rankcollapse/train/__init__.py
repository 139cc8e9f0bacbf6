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
    "SAN",
    "CheckpointStore",
    "CircleNet",
    "DirectoryStore",
    "GridPoint",
    "GridResult",
    "MemoryStore",
    "SANConfig",
    "TrainConfig",
    "TrainSettings",
    "TrainedModel",
    "accuracy",
    "checkpoint_key",
    "train",
    "train_encoder",
    "train_grid",
    "train_model",
    "train_one_by_one",
]
