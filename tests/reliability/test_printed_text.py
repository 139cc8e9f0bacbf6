"""Printed text is text: a user's string (a path, a model name, a --set key, a metric or
experiment name) that looks like rich markup (`[/]`, `[bold]`) is printed as it is, in every
error message and every line a command prints, never parsed (a MarkupError traceback) and
never swallowed (`[bold]` vanishing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankcollapse.cli import main
from rankcollapse.hf import tiny_model

MARKUP = "x[/]y[bold]z"  # both: a closing tag with nothing to close, and a style tag


def erring(files: Path) -> dict[str, list[str]]:
    """A command per kind of user text, each failing on that text."""
    bad = str(files / MARKUP)
    return {
        "measure: file": ["measure", bad + ".npy"],
        "measure: mask": ["measure", str(files / "ok.npy"), "--mask", bad + ".npy"],
        "measure: metric": ["measure", str(files / "ok.npy"), "--metrics", MARKUP],
        "simulate: --out": ["simulate", "--out", str(files / "notes.txt")],
        "simulate: mask": ["simulate", "--mask", MARKUP],
        "probe: model": ["probe", MARKUP],
        "probe: variant": ["probe", "minilm", "--variants", MARKUP],
        "qk-rank: model": ["qk-rank", MARKUP],
        "run: experiment": ["run", MARKUP],
        "run: --set key": ["run", "toy-collapse", "--set", f"{MARKUP}=1"],
        "run: --set value": ["run", "toy-collapse", "--set", f"variants=[{MARKUP}]"],
        "run: --config": ["run", "toy-collapse", "--config", bad + ".yaml"],
        "report: folder": ["report", bad],
        "report --index: folder": ["report", "--index", bad],
        "reproduce: results": ["reproduce", "--results", bad],
        "compare: folder": ["compare", bad],
        "paths: model": ["paths", "decompose", "--model", MARKUP],
        "variants: family": ["variants", "--arch", MARKUP],
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("markup")
    np.save(folder / "ok.npy", np.random.default_rng(0).standard_normal((2, 2, 4, 3)))
    (folder / "notes.txt").write_text("hello")
    return folder


@pytest.mark.parametrize("case", list(erring(Path("."))))
def test_every_error_prints_markup_laden_input_as_text(case, files, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = erring(files)[case]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and err.startswith("error: ")
    shown = next(a for a in argv if "[/]" in a or a.endswith("notes.txt"))
    shown = shown.split("=")[0] if case == "run: --set key" else shown
    if case == "run: --set value":
        shown = MARKUP
    assert shown.removesuffix(".npy").removesuffix(".yaml") in err, f"{case}: {err!r}"


def test_paths_and_model_names_with_markup_print_as_they_are(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / f"out{MARKUP}"
    argv = ["simulate", "--n-layers", "2", "--n-samples", "2", "--n-tokens", "4", "--out", str(out)]
    assert main(argv) == 0
    assert f"wrote {out / 'results.csv'}" in capsys.readouterr().out
    model = tmp_path / f"gpt{MARKUP}"
    tiny_model("gpt2").save_pretrained(model)
    argv = ["probe", str(model), "--random-tokens", "--n-samples", "1", "--n-tokens", "4",
            "--metrics", "res_comp_rel"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert f"[1/1] {model}: probing" in printed.err
    assert f"{model} (pretrained): its own attention mask" in printed.out  # the table's title
    assert f"wrote results/probe/{model.name}/results.csv" in printed.out
