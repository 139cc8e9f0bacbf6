"""docs/reliability.md is the catalogue of bad inputs and faults; this test keeps it true.

Each row names a command, what is wrong with it and what the user sees. A row whose last
column is `catalogue` is run here, in this process: it must end with exit code 2 (a clear
error, never a traceback) and print the text in backticks of its "user sees" column. Any other
row names the test that backs it (`tests/...py::test_name`), which must exist.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from fifos import fifo
from safetensors.torch import save_file

from rankcollapse.cli import main
from rankcollapse.hf import tiny_model

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "docs" / "reliability.md"
ROW = re.compile(r"^\|\s*(\d+)\s*\|(.*)\|(.*)\|(.*)\|(.*)\|\s*$")


def rows() -> list[tuple[int, str, str, str, str]]:
    found = []
    for line in CATALOGUE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            number, *cells = match.groups()
            found.append((int(number), *(cell.strip() for cell in cells)))
    return found


def _code(cell: str) -> str:
    match = re.search(r"`([^`]+)`", cell)
    assert match, f"no `command` or `text` in {cell!r}"
    return match.group(1)


RUN_HERE = [r for r in rows() if r[4] == "catalogue"]
BACKED = [r for r in rows() if r[4] != "catalogue"]


def test_the_catalogue_has_at_least_50_numbered_rows() -> None:
    numbers = [r[0] for r in rows()]
    assert len(numbers) >= 50
    assert numbers == list(range(1, len(numbers) + 1)), "rows are numbered 1, 2, 3, ..."


def test_the_readme_counts_the_catalogues_rows() -> None:
    """The README's "lists N bad inputs" is the number of rows here, not a number typed once."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.search(r"docs/reliability\.md\) lists (\d+) bad inputs", readme)
    assert said, "the README no longer says how many rows docs/reliability.md lists"
    assert int(said.group(1)) == len(rows())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bad input files the catalogue's commands name as {files}/..."""
    folder = tmp_path_factory.mktemp("bad-inputs")
    rng = np.random.default_rng(0)
    arrays = {
        "nan": np.full((2, 2, 4, 3), np.nan),
        "inf": np.full((2, 2, 4, 3), np.inf),
        "ok": rng.standard_normal((2, 2, 4, 3)),
        "int": np.ones((2, 2, 4, 3), dtype=np.int64),
        "vector": rng.standard_normal(4),
        "rank5": rng.standard_normal((1, 2, 2, 4, 3)),
        "one-token": rng.standard_normal((2, 2, 1, 3)),
        "zero-layers": np.zeros((0, 2, 4, 3)),
        "zero-width": np.zeros((2, 2, 4, 0)),
        "mask-shape": np.ones((2, 5), dtype=bool),
    }
    for name, array in arrays.items():
        np.save(folder / f"{name}.npy", array)
    (folder / "broken.pt").write_bytes(b"not a torch file")
    (folder / "notes.txt").write_text("hello")
    draw = torch.Generator().manual_seed(0)
    two = {"a": torch.randn(2, 4, 3, generator=draw), "b": torch.randn(2, 4, 3, generator=draw)}
    save_file(two, folder / "two.safetensors")
    (folder / "bad.yaml").write_text("n_layers: [1, 2\n")
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    (folder / "empty-dir").mkdir()
    (folder / "empty.txt").write_text("")
    tiny_model("bert").save_pretrained(folder / "tiny-bert")  # weights, no tokenizer files
    _activation_files(folder)
    _model_folders(folder)
    _config_files(folder)
    return folder


def _activation_files(folder: Path) -> None:
    np.save(folder / "strings.npy", np.array([["a", "b"], ["c", "d"]]))
    np.save(folder / "records.npy", np.zeros((2, 4, 3), dtype=[("a", "f8"), ("b", "i4")]))
    header = io.BytesIO()  # a header declaring 80 PB of float64, then 64 bytes of data
    shape = (10**5, 10**5, 10**3, 10**3)
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": shape}
    )
    (folder / "huge-header.npy").write_bytes(header.getvalue() + bytes(64))
    (folder / "zero.npy").write_bytes(b"")
    torch.save("hello", folder / "string.pt")
    torch.save([torch.ones(2, 4, 3)], folder / "list.pt")
    torch.save(torch.ones(2, 4, 3).to_sparse(), folder / "sparse.pt")
    np.save(folder / "float-mask.npy", np.full((2, 4), 0.5))
    np.save(folder / "nan-mask.npy", np.full((2, 4), np.nan))
    (folder / "garbage.safetensors").write_bytes(b"\x10" * 64)


def _model_folders(folder: Path) -> None:
    """Copies of the tiny BERT folder, each broken in one way."""
    good = folder / "tiny-bert"
    config = json.loads((good / "config.json").read_text())
    edits = {
        "model-bad-json": "{",
        "model-list-config": "[1, 2]",
        "model-no-type": {k: v for k, v in config.items() if k != "model_type"},
        "model-unknown-type": {**config, "model_type": "nope"},
        "model-zero-layers": {**config, "num_hidden_layers": 0},
        "model-heads": {**config, "num_attention_heads": 5},
        "model-vocab0": {**config, "vocab_size": 0},
        "model-shapes": {**config, "intermediate_size": 48},
    }
    for name, content in edits.items():
        shutil.copytree(good, folder / name)
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name / "config.json").write_text(text)
    shutil.copytree(good, folder / "model-no-weights")
    (folder / "model-no-weights" / "model.safetensors").unlink()
    shutil.copytree(good, folder / "model-truncated")
    weights = folder / "model-truncated" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    shutil.copytree(good, folder / "model-bin")
    (folder / "model-bin" / "model.safetensors").rename(folder / "model-bin" / "pytorch_model.bin")
    (folder / "model-tokenizer-only").mkdir()
    (folder / "model-tokenizer-only" / "vocab.txt").write_text("[PAD]\nhello\n")


def _config_files(folder: Path) -> None:
    fifo(folder / "fifo.yaml")  # no writer: opening it for reading would wait forever
    (folder / "deep.yaml").write_text("n_layers: " + "[" * 100_000 + "]" * 100_000 + "\n")
    (folder / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    aliases = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    aliases += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    (folder / "laughs.yaml").write_text("\n".join([*aliases, "seeds: *a7"]) + "\n")


@pytest.mark.parametrize("row", RUN_HERE, ids=[f"row{r[0]}" for r in RUN_HERE])
def test_catalogue_row_gives_its_clear_error(row, files, tmp_path, capsys, monkeypatch) -> None:
    number, command, _wrong, user_sees, _test = row
    monkeypatch.chdir(tmp_path)  # default output folders land in the test's folder
    argv = shlex.split(_code(command).format(files=files, out=tmp_path / "out"))
    assert argv[0] == "rankcollapse"
    try:
        code = main(argv[1:])
    except SystemExit as exit_:  # argparse's own usage errors
        code = exit_.code
    out, err = capsys.readouterr()
    printed = " ".join((out + err).split())
    assert code == 2, f"row {number}: exit code {code}; printed: {printed[-400:]}"
    assert "Traceback" not in printed, f"row {number} printed a traceback"
    expected = " ".join(_code(user_sees).split())
    assert expected in printed, f"row {number}: {expected!r} not in {printed[-400:]!r}"


@pytest.mark.parametrize("row", BACKED, ids=[f"row{r[0]}" for r in BACKED])
def test_catalogue_row_names_an_existing_test(row) -> None:
    number, *_, test = row
    match = re.fullmatch(r"`?(tests/[\w/.-]+\.py)::(\w+)`?", test)
    assert match, f"row {number}: last column must be 'catalogue' or tests/FILE.py::test_name"
    path, name = match.groups()
    source = (ROOT / path).read_text()
    assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"row {number}: {path} has no {name}"
