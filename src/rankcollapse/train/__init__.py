"""Training loops for the learning experiments."""

from rankcollapse.train.evaluate import accuracy, evaluate_san, path_accuracies
from rankcollapse.train.fit import TaskSetup, TrainedModel, train_model, train_on_task
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

__all__ = [
    "CheckpointStore",
    "DirectoryStore",
    "GridPoint",
    "GridResult",
    "MemoryStore",
    "TaskSetup",
    "TrainConfig",
    "TrainSettings",
    "TrainedModel",
    "accuracy",
    "checkpoint_key",
    "evaluate_san",
    "path_accuracies",
    "train",
    "train_encoder",
    "train_grid",
    "train_model",
    "train_on_task",
    "train_one_by_one",
]
