"""Training loops for the learning experiments."""

from rankcollapse.train.grid import (
    GridPoint,
    GridResult,
    TrainSettings,
    train_grid,
    train_one_by_one,
)

__all__ = [
    "GridPoint",
    "GridResult",
    "TrainSettings",
    "train_grid",
    "train_one_by_one",
]
