"""Inputs for real models: windows of real text, padded paragraphs, or random token ids.

The built-in sample corpus (`rankcollapse/data/corpus.txt`) was written for the project: a few
dozen varied English paragraphs (narrative, science, instructions, letters, news), about 6000
words, enough for 32 windows of 128 tokens with either shipped tokenizer. Windows are cut from
the text tokenized without special tokens, so every window holds exactly `n_tokens` real tokens.
"""

from __future__ import annotations

import codecs
import io
import weakref
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rankcollapse.errors import InputError, option
from rankcollapse.reading import MiB, open_bounded


def sample_corpus() -> str:
    """The built-in sample corpus.

    Example:
        >>> len(sample_corpus().split()) > 5000
        True
    """
    return files("rankcollapse.data").joinpath("corpus.txt").read_text(encoding="utf-8")


CHUNK_CHARS = 2**20  # a text file is read and tokenized this much at a time
MAX_TEXT_BYTES = 1024 * MiB  # tokenized whole, twice: a GiB takes minutes, more is no probe's


def _pieces(text: str | Path | None) -> tuple[Callable[[], Iterator[str]], str]:
    """(pieces, where the text came from): `pieces()` yields the text in order, a file in
    pieces of about CHUNK_CHARS characters cut before a whitespace (words stay whole), so that
    memory does not grow with the file; a str is the text itself, None the corpus.
    `pieces()` raises InputError for a text that is only whitespace."""
    if text is None:
        return lambda: iter([sample_corpus()]), "the built-in sample corpus"
    if isinstance(text, Path):
        if not text.exists():
            raise InputError(f"text file {str(text)!r} does not exist; pass an existing file.")
        where = f"text file {str(text)!r}"
        return lambda: _nonempty(_file_pieces(text), where), where
    return lambda: _nonempty(iter([text]), "the given text"), "the given text"


def _unreadable_text(path: Path) -> Callable[[str], InputError]:
    return lambda problem: InputError(
        f"text file {str(path)!r} cannot be read ({problem}); pass a UTF-8 text file."
    )


def _file_pieces(path: Path) -> Iterator[str]:
    """A regular file of at most MAX_TEXT_BYTES (a FIFO or device is refused, never opened),
    read in pieces: memory does not grow with the file. A byte that is not UTF-8 is refused
    with its offset, so a file in another encoding is never measured as replacement
    characters (the user converts it first)."""
    unreadable = _unreadable_text(path)
    utf8 = codecs.getincrementaldecoder("utf-8")()
    decoder = io.IncrementalNewlineDecoder(utf8, translate=True)  # \r\n and \r read as \n

    def decoded(data: bytes, offset: int, *, final: bool = False) -> str:
        held = len(utf8.getstate()[0])  # bytes of a character the last block cut
        try:
            return decoder.decode(data, final)
        except UnicodeDecodeError as err:
            at = offset - held + err.start
            raise unreadable(f"not UTF-8 at byte {at:,}: {err.reason}") from None

    with open_bounded(path, MAX_TEXT_BYTES, error=unreadable) as raw:
        rest, offset = "", 0
        while data := raw.read(CHUNK_CHARS):
            rest += decoded(data, offset)
            offset += len(data)
            cut = max(rest.rfind(" "), rest.rfind("\n"))
            if cut <= 0 and len(rest) < 4 * CHUNK_CHARS:
                continue  # no whitespace yet: a longer piece
            cut = cut if cut > 0 else CHUNK_CHARS
            yield rest[:cut]
            rest = rest[cut:]
        rest += decoded(b"", offset, final=True)  # a character the file's end cuts short
        if rest:
            yield rest


def _nonempty(pieces: Iterator[str], where: str) -> Iterator[str]:
    seen_text = False
    for piece in pieces:
        seen_text = seen_text or bool(piece.strip())
        yield piece
    if not seen_text:
        raise InputError(
            f"{where} is empty; pass a file with text in it, or no file for the sample corpus."
        )


_CORPUS_IDS: weakref.WeakKeyDictionary[Any, tuple[int, Tensor]] = weakref.WeakKeyDictionary()


def _tokenize(tokenizer: Any, text: str) -> Tensor:
    return torch.tensor(
        tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=torch.long
    )


def _id_pieces(
    tokenizer: Any, text: str | Path | None
) -> tuple[Callable[[], Iterator[Tensor]], str]:
    """(pieces, where the text came from): `pieces()` yields the text's token ids in order, a
    piece at a time. The built-in corpus is tokenised once per tokenizer (and vocabulary size):
    a probe called again on the same model does not pay for it twice."""
    pieces, where = _pieces(text)
    if isinstance(text, Path):  # read in pieces (twice by load_windows), never held whole
        return lambda: (_tokenize(tokenizer, piece) for piece in pieces()), where
    cached = _CORPUS_IDS.get(tokenizer) if text is None else None
    if cached is None or cached[0] != len(tokenizer):
        (content,) = pieces()  # one piece; reading it to the end checks it is not empty
        cached = (len(tokenizer), _tokenize(tokenizer, content))
        if text is None:
            _CORPUS_IDS[tokenizer] = cached
    ids = cached[1]
    return lambda: iter([ids]), where


def _windows(pieces: Iterator[Tensor], chosen: list[int], n_tokens: int) -> Tensor:
    """Windows `chosen` (sorted indices of consecutive n_tokens-long windows) of the ids that
    `pieces` yields in order; only the ids of the window being cut are held."""
    windows, start, held = [], 0, torch.zeros(0, dtype=torch.long)  # held begins at `start`
    wanted = iter(chosen)
    window = next(wanted, None)
    for piece in pieces:
        held = torch.cat([held, piece])
        while window is not None and (window + 1) * n_tokens <= start + len(held):
            begin = window * n_tokens - start
            windows.append(held[begin : begin + n_tokens])
            window = next(wanted, None)
        keep_from = len(held) if window is None else min(len(held), window * n_tokens - start)
        held, start = held[keep_from:], start + keep_from
    return torch.stack(windows)


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
            f"pass a model whose config has vocab_size > 0, or a tokenizer "
            f"({option('tokenizer', 'DIR')})."
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
            f"files, or a vision model); pass a tokenizer, or random token ids "
            f"({option('random_tokens')}) for a text model, images ({option('images', 'DIR')}) "
            "or random pixels for a vision model."
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
    pieces, where = _id_pieces(tokenizer, text)
    n_ids = sum(len(piece) for piece in pieces())  # a file is read twice, never held whole
    n_windows = n_ids // n_tokens
    if n_windows < n_samples:
        raise InputError(
            f"{where} has {n_ids} tokens with this tokenizer, enough for {n_windows} windows "
            f"of {n_tokens}, but {n_samples} x {n_tokens} = {n_samples * n_tokens} were requested. "
            f"Pass a longer text, or fewer samples ({option('n_samples', None)}) or tokens "
            f"({option('n_tokens', None)})."
        )
    chosen = torch.randperm(n_windows, generator=gen)[:n_samples].sort().values
    windows = _windows(pieces(), chosen.tolist(), n_tokens)
    return windows, torch.ones_like(windows, dtype=torch.bool)


def _paragraphs(pieces: Iterator[str]) -> Iterator[str]:
    """The non-blank paragraphs (separated by a blank line, "\\n\\n") of a text given in pieces."""
    rest = ""
    for piece in pieces:
        *done, rest = (rest + piece).split("\n\n")
        yield from (p for p in done if p.strip())
    if rest.strip():
        yield rest


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
    pieces, where = _pieces(text)
    rows = []
    for paragraph in _paragraphs(pieces()):
        row = _tokenize(tokenizer, paragraph)[:max_tokens]
        rows += [row] if len(row) >= 2 else []
        if len(rows) == n_samples:
            break  # the rest of a file is never read
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
