"""Sorting task (Dong et al. 2021, Sec. 5): read a sequence of digits, output it sorted.

Every position is classified: the class of position i is the i-th smallest input token.
"""

from __future__ import annotations

import torch

from rankcollapse.errors import ConfigError
from rankcollapse.tasks._baselines import TaskData


def sorting_data(n_samples: int, *, seed: int, n_tokens: int = 8, vocab_size: int = 10) -> TaskData:
    """`n_samples` sequences of `n_tokens` digits drawn uniformly from {0..vocab_size-1}.

    Repeats are allowed (as in the authors' code); the target is the sorted sequence.

    Example:
        >>> data = sorting_data(2, seed=0, n_tokens=4, vocab_size=3)
        >>> bool((data.targets == data.inputs.sort(dim=1).values).all())
        True
    """
    for key, value, low in (
        ("n_samples", n_samples, 1),
        ("n_tokens", n_tokens, 2),
        ("vocab_size", vocab_size, 2),
    ):
        if value < low:
            raise ConfigError(f"sorting: {key} must be >= {low}, got {value}.")
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randint(vocab_size, (n_samples, n_tokens), generator=generator)
    return TaskData("sorting", inputs, inputs.sort(dim=1).values, vocab_size, vocab_size)
