"""Text files are read in pieces: the tokenizer never sees more than a piece, the windows and
paragraphs are those of the whole text, and paragraphs stop reading once they have enough."""

from __future__ import annotations

import pytest
import torch

from rankcollapse.errors import InputError
from rankcollapse.hf import text
from rankcollapse.hf.models import _minilm_tokenizer


class Recording:
    """MiniLM's tokenizer, recording the length of every text it is given."""

    def __init__(self) -> None:
        self.tokenizer = _minilm_tokenizer()
        self.lengths: list[int] = []

    def __call__(self, content: str, **kwargs):
        self.lengths.append(len(content))
        return self.tokenizer(content, **kwargs)

    def __len__(self) -> int:
        return len(self.tokenizer)

    def __getattr__(self, name: str):
        return getattr(self.tokenizer, name)


def windows_of_the_whole_text(content: str, n_samples: int, n_tokens: int, seed: int):
    """The windows as drawn from the text tokenized at once (the definition)."""
    ids = text._tokenize(_minilm_tokenizer(), content)
    n_windows = len(ids) // n_tokens
    chosen = torch.randperm(n_windows, generator=torch.Generator().manual_seed(seed))
    return ids[: n_windows * n_tokens].view(n_windows, n_tokens)[chosen[:n_samples].sort().values]


@pytest.mark.parametrize(("n_samples", "n_tokens", "seed"), [(32, 128, 3), (5, 7, 1), (1, 2, 0)])
def test_windows_read_in_pieces_are_the_windows_of_the_whole_text(
    tmp_path, monkeypatch, n_samples, n_tokens, seed
):
    monkeypatch.setattr(text, "CHUNK_CHARS", 997)  # dozens of pieces, cut anywhere
    corpus = text.sample_corpus()
    (tmp_path / "corpus.txt").write_text(corpus)
    tokenizer = Recording()
    windows, mask = text.load_windows(
        tokenizer, text=tmp_path / "corpus.txt", n_samples=n_samples, n_tokens=n_tokens, seed=seed
    )
    assert torch.equal(windows, windows_of_the_whole_text(corpus, n_samples, n_tokens, seed))
    assert bool(mask.all())
    assert max(tokenizer.lengths) < 2 * 997 < len(corpus) / 10  # never the whole file


def test_paragraphs_read_in_pieces_are_those_of_the_text_and_stop_reading_early(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(text, "CHUNK_CHARS", 500)
    corpus = text.sample_corpus()
    (tmp_path / "corpus.txt").write_text(corpus)
    tokenizer = Recording()
    ids, mask = text.load_paragraphs(tokenizer, text=tmp_path / "corpus.txt", n_samples=3)
    whole, whole_mask = text.load_paragraphs(_minilm_tokenizer(), text=corpus, n_samples=3)
    assert torch.equal(ids, whole) and torch.equal(mask, whole_mask)
    assert sum(tokenizer.lengths) < len(corpus) / 4  # the rest of the file was never read


def test_a_file_of_only_whitespace_is_empty(tmp_path):
    (tmp_path / "blank.txt").write_text(" \n\n \t\n" * 1000)
    with pytest.raises(InputError, match="is empty; pass a file with text in it"):
        text.load_windows(_minilm_tokenizer(), text=tmp_path / "blank.txt", n_samples=1)


def test_a_file_in_another_encoding_is_refused_at_its_first_bad_byte_and_crlf_reads_as_lf(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(text, "CHUNK_CHARS", 5)  # the bad byte in the second block
    words = "the café is open today\n\nand the second paragraph follows it\n"
    (tmp_path / "latin1.txt").write_bytes(words.encode("latin-1"))
    with pytest.raises(  # it was read as U+FFFD and measured
        InputError, match=r"latin1.txt' cannot be read \(not UTF-8 at byte 7: invalid continuation"
    ):
        text.load_windows(
            _minilm_tokenizer(), text=tmp_path / "latin1.txt", n_samples=1, n_tokens=2
        )
    (tmp_path / "crlf.txt").write_bytes(words.replace("\n", "\r\n").encode())
    crlf = text.load_paragraphs(_minilm_tokenizer(), text=tmp_path / "crlf.txt", n_samples=2)
    lf = text.load_paragraphs(_minilm_tokenizer(), text=words, n_samples=2)
    assert all(torch.equal(a, b) for a, b in zip(crlf, lf, strict=True))
    assert len(crlf[0]) == 2  # two paragraphs: the blank line between them is found in CRLF too
