"""Inputs for real models: windows of real text, padded paragraphs, or random token ids.

The built-in sample corpus (`rankcollapse/data/corpus.txt`) was written for the project: a few
dozen varied English paragraphs (narrative, science, instructions, letters, news), about 6000
words, enough for 32 windows of 128 tokens with either shipped tokenizer. Windows are cut from
the text tokenized without special tokens, so every window holds exactly `n_tokens` real tokens.
"""

from __future__ import annotations

import weakref
from importlib.resources import files
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import InputError


def sample_corpus() -> str:
    """The built-in sample corpus.

    Example:
        >>> len(sample_corpus().split()) > 5000
        True
    """
    return files("rankcollapse.data").joinpath("corpus.txt").read_text(encoding="utf-8")


def _read(text: str | Path | None) -> tuple[str, str]:
    """(text, where it came from): a Path is read, a str is the text itself, None the corpus."""
    if text is None:
        return sample_corpus(), "the built-in sample corpus"
    if isinstance(text, Path):
        if not text.is_file():
            raise InputError(f"text file {str(text)!r} does not exist; pass an existing file.")
        content, where = (
            text.read_text(encoding="utf-8", errors="replace"),
            f"text file {str(text)!r}",
        )
    else:
        content, where = text, "the given text"
    if not content.strip():
        raise InputError(
            f"{where} is empty; pass a file with text in it, or no file for the sample corpus."
        )
    return content, where


_CORPUS_IDS: weakref.WeakKeyDictionary[Any, tuple[int, Tensor]] = weakref.WeakKeyDictionary()


def _token_ids(tokenizer: Any, text: str | Path | None) -> tuple[Tensor, str]:
    """(ids, where the text came from). The built-in corpus is tokenised once per tokenizer (and
    vocabulary size): a probe called again on the same model does not pay for it twice."""
    cached = _CORPUS_IDS.get(tokenizer) if text is None else None
    if cached is not None and cached[0] == len(tokenizer):
        return cached[1], "the built-in sample corpus"
    content, where = _read(text)
    ids = torch.tensor(
        tokenizer(content, add_special_tokens=False, verbose=False)["input_ids"], dtype=torch.long
    )
    if text is None:
        _CORPUS_IDS[tokenizer] = (len(tokenizer), ids)
    return ids, where


def random_token_ids(
    vocab_size: int,
    special: set[int] | frozenset[int] = frozenset(),
    *,
    n_samples: int = 32,
    n_tokens: int = 128,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """Uniform random ids over range(vocab_size) without the `special` ids, seeded.

    Example:
        >>> ids, mask = random_token_ids(5, {0}, n_samples=2, n_tokens=3)
        >>> ids.shape, bool((ids > 0).all() and (ids < 5).all()), bool(mask.all())
        (torch.Size([2, 3]), True, True)
    """
    _check_counts(n_samples, n_tokens)
    vocab = torch.tensor([i for i in range(vocab_size) if i not in special], dtype=torch.long)
    if len(vocab) == 0:
        raise InputError(
            f"no token ids to draw from: vocabulary of {vocab_size} ids, {len(special)} special; "
            "pass a model whose config has vocab_size > 0, or a tokenizer (--tokenizer DIR)."
        )
    gen = torch.Generator().manual_seed(seed)
    ids = vocab[torch.randint(len(vocab), (n_samples, n_tokens), generator=gen)]
    return ids, torch.ones_like(ids, dtype=torch.bool)


def random_pixels(n_samples: int, *, channels: int = 3, size: int = 224, seed: int = 0) -> Tensor:
    """Standard normal pixel values (n_samples, channels, size, size), as a normalised image.

    Example:
        >>> random_pixels(2, size=4).shape
        torch.Size([2, 3, 4, 4])
    """
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n_samples, channels, size, size, generator=gen)


def _check_counts(n_samples: int, n_tokens: int) -> None:
    if n_samples < 1 or n_tokens < 2:
        raise InputError(
            f"need n_samples >= 1 and n_tokens >= 2, got n_samples={n_samples}, n_tokens={n_tokens}."
        )


def load_windows(
    tokenizer: Any,
    *,
    text: str | Path | None = None,
    n_samples: int = 32,
    n_tokens: int = 128,
    random_tokens: bool = False,
    seed: int = 0,
) -> tuple[Tensor, Tensor]:
    """`n_samples` windows of exactly `n_tokens` real tokens.

    Args:
        tokenizer: a Hugging Face tokenizer.
        text: None (sample corpus), a `Path` to a text file, or the text itself as a str.
        n_samples, n_tokens: how many windows, how long.
        random_tokens: uniform random ids over the non-special vocabulary instead of text.
        seed: which non-overlapping windows are drawn (or which random ids).

    Returns:
        input_ids (n_samples, n_tokens) long and token_mask (n_samples, n_tokens) all True.
    """
    _check_counts(n_samples, n_tokens)
    if tokenizer is None:
        raise InputError(
            "no tokenizer to cut text into windows (a model directory saved without tokenizer "
            "files, or a vision model); pass a tokenizer, or random token ids (--random-tokens) "
            "for a text model, images (--images DIR) or random pixels for a vision model."
        )
    if random_tokens:
        return random_token_ids(
            len(tokenizer),
            set(tokenizer.all_special_ids),
            n_samples=n_samples,
            n_tokens=n_tokens,
            seed=seed,
        )
    gen = torch.Generator().manual_seed(seed)
    ids, where = _token_ids(tokenizer, text)
    n_windows = len(ids) // n_tokens
    if n_windows < n_samples:
        raise InputError(
            f"{where} has {len(ids)} tokens with this tokenizer, enough for {n_windows} windows "
            f"of {n_tokens}, but {n_samples} x {n_tokens} = {n_samples * n_tokens} were requested. "
            "Pass a longer text, or fewer samples (--n-samples) or tokens (--n-tokens)."
        )
    chosen = torch.randperm(n_windows, generator=gen)[:n_samples].sort().values
    windows = ids[: n_windows * n_tokens].view(n_windows, n_tokens)[chosen]
    return windows, torch.ones_like(windows, dtype=torch.bool)


def load_paragraphs(
    tokenizer: Any,
    *,
    text: str | Path | None = None,
    n_samples: int = 32,
    max_tokens: int = 128,
) -> tuple[Tensor, Tensor]:
    """The first `n_samples` paragraphs (blank-line separated), each truncated to `max_tokens`,
    right-padded into one batch.

    Returns:
        input_ids (n_samples, n_max) and token_mask (n_samples, n_max), False on pads.
    """
    content, where = _read(text)
    paragraphs = [p for p in content.split("\n\n") if p.strip()]
    rows = [_token_ids(tokenizer, p)[0][:max_tokens] for p in paragraphs]
    rows = [r for r in rows if len(r) >= 2]
    if len(rows) < n_samples:
        raise InputError(
            f"{where} has {len(rows)} paragraphs of >= 2 tokens but {n_samples} were requested; "
            "pass a longer text or fewer samples."
        )
    rows = rows[:n_samples]
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((n_samples, width), pad, dtype=torch.long)
    mask = torch.zeros((n_samples, width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = True
    return ids, mask
