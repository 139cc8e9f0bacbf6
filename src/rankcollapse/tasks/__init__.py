"""Data generators for the learning experiments (seeded streams, trivial baselines)."""

from rankcollapse.tasks.neighbours import (
    NeighbourBatch,
    NeighbourTask,
    farthest_point,
    nearest_neighbour,
    relative_mse,
)

__all__ = [
    "NeighbourBatch",
    "NeighbourTask",
    "farthest_point",
    "nearest_neighbour",
    "relative_mse",
]
