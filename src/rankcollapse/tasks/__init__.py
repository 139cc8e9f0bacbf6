"""Data generators for the learning experiments (seeded streams, trivial baselines)."""

from rankcollapse.tasks._baselines import TaskData, trivial_baselines
from rankcollapse.tasks.circle import (
    CircleData,
    circle_data,
    off_arc_starts,
    previous_pair_inputs,
    rollout,
    rollout_frame,
)
from rankcollapse.tasks.convex_hull import convex_hull_data, hull_vertex_labels
from rankcollapse.tasks.memorization import label_ceiling, memorization_data
from rankcollapse.tasks.named import (
    TASKS,
    TaskName,
    san_config,
    task_data,
    train_and_eval_data,
)
from rankcollapse.tasks.neighbours import (
    NeighbourBatch,
    NeighbourTask,
    farthest_point,
    layer_error,
    linear_baseline,
    nearest_neighbour,
    relative_mse,
)
from rankcollapse.tasks.next_byte import VOCAB_SIZE, byte_windows, unigram_loss
from rankcollapse.tasks.sorting import sorting_data

__all__ = [
    "TASKS",
    "VOCAB_SIZE",
    "CircleData",
    "NeighbourBatch",
    "NeighbourTask",
    "TaskData",
    "TaskName",
    "byte_windows",
    "circle_data",
    "convex_hull_data",
    "farthest_point",
    "hull_vertex_labels",
    "label_ceiling",
    "layer_error",
    "linear_baseline",
    "memorization_data",
    "nearest_neighbour",
    "off_arc_starts",
    "previous_pair_inputs",
    "relative_mse",
    "rollout",
    "rollout_frame",
    "san_config",
    "sorting_data",
    "task_data",
    "train_and_eval_data",
    "trivial_baselines",
    "unigram_loss",
]
