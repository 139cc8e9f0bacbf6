"""Training loops for the learning experiments."""

from rankcollapse.train.amsel import (
    EncoderConfig,
    TrainingConfig,
    tail_change,
    train_encoder,
    train_farthest_encoder,
    training_rows,
)
from rankcollapse.train.grid import (
    GridPoint,
    GridResult,
    TrainSettings,
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
    "EncoderConfig",
    "GridPoint",
    "GridResult",
    "MemoryStore",
    "SANConfig",
    "TrainConfig",
    "TrainSettings",
    "TrainedModel",
    "TrainingConfig",
    "accuracy",
    "checkpoint_key",
    "tail_change",
    "train",
    "train_encoder",
    "train_farthest_encoder",
    "train_grid",
    "train_model",
    "train_one_by_one",
    "training_rows",
]
