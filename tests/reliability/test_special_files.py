"""A named pipe (FIFO) where a file belongs is refused or passed over, never opened: opening
one for reading waits for a writer forever. Each reader of an outside file is tried here with
a FIFO in place of its file (the results folder's files: tests/report/test_damaged_folders.py;
run YAML: the catalogue; model folders: tests/hf/test_folders.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fifos import fifo

from rankcollapse.errors import InputError
from rankcollapse.hf import load_images, load_model, load_windows
from rankcollapse.hf.images import image_normalisation
from rankcollapse.runner._store import load_unit
from rankcollapse.train import DirectoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.report import read_manifest
from rankcollapse.report.build import stored_report
from rankcollapse.runner import run_experiment

pytestmark = pytest.mark.usefixtures("no_hang")  # a FIFO opened fails, never hangs


def test_a_fifo_as_a_unit_file_is_recomputed_with_the_reason(tmp_path):
    fifo(tmp_path / "u.json")
    stored, why = load_unit(tmp_path / "u.json", {"item": 0})
    assert stored is None and "a named pipe (FIFO), not a file; it is never opened" in why


def test_a_fifo_as_a_text_file_is_refused(tmp_path):
    fifo(tmp_path / "pipe.txt")
    with pytest.raises(InputError, match=r"text file .* cannot be read \(a named pipe"):
        load_windows(load_model("minilm").tokenizer, text=tmp_path / "pipe.txt", n_samples=1,
                     n_tokens=4)  # fmt: skip


def test_a_fifo_as_an_image_or_a_preprocessor_config_is_refused(tmp_path):
    fifo(tmp_path / "a.png")
    with pytest.raises(InputError, match=r"image 'a.png' .* cannot be read \(a named pipe"):
        load_images(tmp_path, size=8)
    fifo(tmp_path / "preprocessor_config.json")
    with pytest.raises(InputError, match=r"not a readable JSON file \(a named pipe"):
        image_normalisation(tmp_path, channels=3)


def test_a_fifo_as_a_checkpoint_is_a_miss(tmp_path):
    fifo(tmp_path / "key.pt")
    assert DirectoryStore(tmp_path).load("key", {"a": 1}) is None


def test_a_fifo_as_a_stored_report_rebuilds_it(tmp_path):
    run_experiment(TINY, overrides={"log_dir": str(tmp_path), "items": 1}, out=tmp_path / "run")
    manifest = read_manifest(tmp_path / "run")
    assert stored_report(tmp_path / "run", TINY, manifest) is not None
    fifo(tmp_path / "run" / "report.html")
    assert stored_report(tmp_path / "run", TINY, manifest) is None


def test_a_fifo_in_a_tokenizer_folder_is_refused(tmp_path):
    from rankcollapse.hf.models import load_tokenizer

    fifo(tmp_path / "tokenizer.json")
    with pytest.raises(InputError, match=r"holds tokenizer.json, a named pipe \(FIFO\)"):
        load_tokenizer(tmp_path)
