"""Next-byte prediction on the built-in corpus: real text for a small language model, with no
tokenizer to ship (the vocabulary is the 256 byte values).

The corpus's UTF-8 bytes are split once: the first `1 - held_out_share` for training, the rest
held out (the monitor's batch, the evaluation). Windows of n_tokens + 1 bytes give inputs (the
first n_tokens) and targets (the last n_tokens). The trivial baseline is measured on the same
split: the cross-entropy of the held-out bytes under the training bytes' frequencies (a model
that ignores the context), in nats per byte.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from rankcollapse.errors import ConfigError
from rankcollapse.hf import sample_corpus

VOCAB_SIZE = 256


def corpus_split(*, held_out_share: float = 0.1) -> dict[str, Tensor]:
    """{"train": bytes, "held_out": bytes} of the built-in corpus as long tensors."""
    data = torch.tensor(list(sample_corpus().encode("utf-8")), dtype=torch.long)
    cut = int(len(data) * (1 - held_out_share))
    return {"train": data[:cut], "held_out": data[cut:]}


def byte_windows(
    n_tokens: int,
    *,
    part: Literal["train", "held_out"],
    n_samples: int | None = None,
    held_out_share: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """(inputs, targets), each (N, n_tokens) long: windows of a part of the corpus, every
    n_tokens bytes (N as many as fit), or the first `n_samples` of them.

    Example:
        >>> inputs, targets = byte_windows(8, part="held_out", n_samples=2)
        >>> inputs.shape, bool((inputs[:, 1:] == targets[:, :-1]).all())
        (torch.Size([2, 8]), True)
    """
    data = corpus_split(held_out_share=held_out_share)[part]
    starts = torch.arange(0, len(data) - n_tokens - 1, n_tokens)
    if n_samples is not None:
        if n_samples > len(starts):
            raise ConfigError(
                f"the {part} part of the corpus holds {len(starts)} windows of {n_tokens} bytes, "
                f"fewer than n_samples={n_samples}; ask for fewer samples or shorter windows."
            )
        starts = starts[:n_samples]
    windows = data[starts[:, None] + torch.arange(n_tokens + 1)]
    return windows[:, :-1], windows[:, 1:]


def unigram_loss(*, held_out_share: float = 0.1) -> float:
    """Cross-entropy (nats per byte) of the held-out bytes under the training bytes'
    frequencies (add-one smoothed): the loss of a model that ignores the context.

    Example:
        >>> 2.0 < unigram_loss() < 5.55  # below log 256 = 5.55: text is not uniform bytes
        True
    """
    split = corpus_split(held_out_share=held_out_share)
    counts = torch.bincount(split["train"], minlength=VOCAB_SIZE).double() + 1
    log_p = (counts / counts.sum()).log()
    return float(-log_p[split["held_out"]].mean())
