"""Trivial baselines of a classification task, measured on the task's own labels."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError

_GUESS_SALT = 0x5EED_BA5E


@dataclass(frozen=True)
class TaskData:
    """One generated data set: inputs, per-token class labels and what the SAN needs to read them.

    Attributes:
        name: task name ("sorting", "convex-hull", "memorization").
        inputs: token ids, long `(b, n)`, or point coordinates, float32 `(b, n, 2)`.
        targets: class of every token, long `(b, n)`.
        n_classes: number of classes (targets lie in 0..n_classes-1).
        vocab_size: number of distinct token ids for token inputs, None for points.
    """

    name: str
    inputs: Tensor
    targets: Tensor
    n_classes: int
    vocab_size: int | None = None

    @property
    def n_tokens(self) -> int:
        return int(self.targets.shape[1])

    def __len__(self) -> int:
        return int(self.targets.shape[0])

    def baselines(self, *, seed: int = 0) -> dict[str, float]:
        """The trivial baselines ("random", "majority", "position_majority") on this data."""
        return trivial_baselines(self.targets, self.n_classes, seed=seed)


def trivial_baselines(targets: Tensor, n_classes: int, *, seed: int = 0) -> dict[str, float]:
    """Accuracy of the trivial predictors, measured on `targets` (b, n).

    - "random": a uniformly random class for every token (drawn with `seed`), scored on `targets`;
      close to 1 / n_classes.
    - "majority": always the most frequent class of `targets`.
    - "position_majority": at each position, the most frequent class of `targets` at that
      position: what a predictor that sees only the position can score. It is at least
      "majority"; for sorting (position i holds the i-th smallest digit) it is much higher.

    The priors are taken from the labels they are scored on, so the baselines are upper bounds
    of what such a predictor learns from other data: a claim that beats them is not flattered.

    Example:
        >>> baselines = trivial_baselines(torch.tensor([[0, 1], [0, 1], [1, 1]]), 2)
        >>> baselines["majority"], baselines["position_majority"]
        (0.6666666666666666, 0.8333333333333334)
    """
    if targets.numel() == 0:
        raise ConfigError("trivial baselines need at least one label; got an empty target tensor.")
    if n_classes < 1:
        raise ConfigError(f"n_classes must be >= 1, got {n_classes}.")
    flat = targets.reshape(-1)
    # Salted: the data generators also seed torch generators with small integers, and guesses
    # drawn from the data's own stream would copy the inputs.
    generator = torch.Generator().manual_seed(_GUESS_SALT + seed)
    guesses = torch.randint(n_classes, flat.shape, generator=generator)
    counts = torch.bincount(flat, minlength=n_classes)
    columns = targets.reshape(len(targets), -1)  # (b, n): one prior per position
    per_position = torch.stack([torch.bincount(c, minlength=n_classes) for c in columns.T])
    return {
        "random": float((guesses == flat).double().mean()),
        "majority": float(counts.max().double() / flat.numel()),
        "position_majority": float(per_position.max(dim=1).values.sum().double() / flat.numel()),
    }
