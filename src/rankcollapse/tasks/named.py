"""The classification tasks of Dong et al. 2021, Sec. 5, by name, with their evaluation data.

sorting        length-n sequences over {0..9} -> the sorted sequence (per-position classes)
convex-hull    n points in the plane -> is the point a vertex of the set's convex hull
memorization   random 0/1 labels on the tokens of real text windows
"""

from __future__ import annotations

from typing import Literal

from rankcollapse.errors import ConfigError, unknown_name
from rankcollapse.nets import SANConfig
from rankcollapse.tasks._baselines import TaskData
from rankcollapse.tasks.convex_hull import convex_hull_data
from rankcollapse.tasks.memorization import memorization_data
from rankcollapse.tasks.sorting import sorting_data

TaskName = Literal["sorting", "convex-hull", "memorization"]
TASKS: tuple[TaskName, ...] = ("sorting", "convex-hull", "memorization")


def task_data(task: str, n_samples: int, *, seed: int, n_tokens: int) -> TaskData:
    """`n_samples` sequences of `n_tokens` tokens of `task`, drawn with `seed`.

    Example:
        >>> task_data("sorting", 2, seed=0, n_tokens=5).inputs.shape
        torch.Size([2, 5])
    """
    if task == "sorting":
        return sorting_data(n_samples, seed=seed, n_tokens=n_tokens)
    if task == "convex-hull":
        return convex_hull_data(n_samples, seed=seed, n_points=n_tokens)
    if task == "memorization":
        return memorization_data(n_samples, seed=seed, n_tokens=n_tokens)
    raise unknown_name("task", task, TASKS)


def train_and_eval_data(
    task: str, n_train: int, n_eval: int, *, seed: int, n_tokens: int
) -> tuple[TaskData, TaskData]:
    """Training data and evaluation data of `task`, from one random stream (`seed`).

    Sorting and convex hull: `n_train + n_eval` fresh sequences, the first `n_train` to train,
    the rest to evaluate. Memorization is scored on what it memorised: the evaluation data are
    the first `n_eval` training windows (`n_eval <= n_train`).

    Example:
        >>> train, held_out = train_and_eval_data("sorting", 4, 2, seed=0, n_tokens=5)
        >>> len(train), len(held_out)
        (4, 2)
    """
    if task == "memorization":
        if n_eval > n_train:
            raise ConfigError(
                f"memorization is scored on its training windows, so n_eval ({n_eval}) must be "
                f"<= n_train ({n_train}); lower n_eval or raise n_train."
            )
        data = task_data(task, n_train, seed=seed, n_tokens=n_tokens)
        return data, _rows(data, slice(0, n_eval))
    data = task_data(task, n_train + n_eval, seed=seed, n_tokens=n_tokens)
    return _rows(data, slice(0, n_train)), _rows(data, slice(n_train, None))


def san_config(
    data: TaskData,
    *,
    n_layers: int,
    n_heads: int,
    d_model: int,
    seed: int,
    dropout: float = 0.1,
) -> SANConfig:
    """The SAN of Sec. 5 for `data`: points embedded by an MLP (convex hull), token ids by a
    table; learned positions for sorting only (the class of position i is the i-th smallest);
    training-time dropout `dropout` (the authors' 0.1).

    Example:
        >>> data = task_data("sorting", 2, seed=0, n_tokens=5)
        >>> san_config(data, n_layers=2, n_heads=2, d_model=8, seed=0).n_positions
        5
    """
    points = data.inputs.is_floating_point()
    return SANConfig(
        inputs="points" if points else "tokens",
        n_classes=data.n_classes,
        vocab_size=None if points else data.vocab_size,
        n_positions=data.n_tokens if data.name == "sorting" else 0,
        n_layers=n_layers,
        n_heads=n_heads,
        d_model=d_model,
        dropout=dropout,
        seed=seed,
    )


def _rows(data: TaskData, rows: slice) -> TaskData:
    return TaskData(
        data.name, data.inputs[rows], data.targets[rows], data.n_classes, data.vocab_size
    )
