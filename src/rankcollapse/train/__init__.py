"""Training loops for the learning experiments."""

from rankcollapse.train.amsel import (
    EncoderConfig,
    TrainingConfig,
    tail_change,
    train_encoder,
    train_encoders,
    train_farthest_encoder,
    train_farthest_encoders,
    training_rows,
)
from rankcollapse.train.evaluate import (
    accuracy,
    evaluate_san,
    path_accuracies,
    path_accuracy_tables,
    path_effectiveness,
)
from rankcollapse.train.fit import TaskSetup, TrainedModel, train_model, train_models, train_on_task
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
from rankcollapse.train.stacked import train_stacked

__all__ = [
    "CheckpointStore",
    "DirectoryStore",
    "EncoderConfig",
    "GridPoint",
    "GridResult",
    "MemoryStore",
    "TaskSetup",
    "TrainConfig",
    "TrainSettings",
    "TrainedModel",
    "TrainingConfig",
    "accuracy",
    "checkpoint_key",
    "evaluate_san",
    "path_accuracies",
    "path_accuracy_tables",
    "path_effectiveness",
    "tail_change",
    "train",
    "train_encoder",
    "train_encoders",
    "train_farthest_encoder",
    "train_farthest_encoders",
    "train_grid",
    "train_model",
    "train_models",
    "train_on_task",
    "train_one_by_one",
    "train_stacked",
    "training_rows",
]
