"""`rankcollapse paths`: files written, numbers in them, errors before work."""

import re

import pandas as pd
import pytest

from rankcollapse.cli import main
from rankcollapse.hf.models import tiny_model


def test_count_writes_exact_counts(tmp_path):
    assert (
        main(["paths", "count", "--n-layers", "3", "--n-heads", "2", "--out", str(tmp_path)]) == 0
    )
    df = pd.read_csv(tmp_path / "paths.csv")
    assert df["n_paths"].tolist() == [1, 6, 12, 8]
    assert (tmp_path / "paths.png").is_file() and (tmp_path / "paths.svg").is_file()


def test_count_prints_every_length_as_an_exact_integer(tmp_path, capsys):
    assert main(["paths", "count", "--arch", "bert-base", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 13  # lengths 0..12, none hidden
    assert "8,916,100,448,256" in out and "e+" not in out


def test_decompose_of_a_toy_is_exact_and_written(tmp_path, capsys):
    argv = [
        "paths",
        "decompose",
        "--n-layers",
        "2",
        "--n-heads",
        "2",
        "--d-model",
        "8",
        "--n-tokens",
        "4",
        "--n-samples",
        "2",
        "--norm",
        "post",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    df = pd.read_csv(tmp_path / "components.csv")
    shares = df[df["metric"] == "share"].groupby("sample")["value"].sum()
    assert shares.round(12).tolist() == [1.0, 1.0]
    assert "max relative error" in capsys.readouterr().out


def test_products_writes_one_row_per_path_and_sample(tmp_path):
    argv = [
        "paths",
        "products",
        "--n-layers",
        "3",
        "--n-heads",
        "2",
        "--d-model",
        "8",
        "--n-tokens",
        "4",
        "--n-samples",
        "2",
        "--n-paths",
        "5",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    assert len(pd.read_csv(tmp_path / "products.csv")) == 3 * 5 * 2


def test_half_a_network_size_is_refused(capsys, tmp_path):
    assert main(["paths", "count", "--n-layers", "3", "--out", str(tmp_path)]) == 2
    assert "give both --n-layers and --n-heads" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["paths", "count", "--arch"], ["probe", "--random-tokens"]])
def test_a_name_too_long_for_any_folder_is_an_unknown_name(capsys, tmp_path, command):
    """300 characters: no file system holds such a name, and asking whether it is a folder
    raised OSError (ENAMETOOLONG) from deep inside."""
    argv = [*command[:3], "x" * 300, *command[3:], "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert re.search(r"unknown (architecture|model) 'x{300}'", capsys.readouterr().err)


def test_decompose_of_saved_parallel_and_vision_models_is_exact(tmp_path, capsys):
    for family in ["gpt_neox", "vit"]:  # parallel residual; pixel inputs
        tiny_model(family).save_pretrained(tmp_path / family)
        out = tmp_path / f"out-{family}"
        argv = ["paths", "decompose", "--model", str(tmp_path / family), "--n-samples", "2",
                "--n-tokens", "6", "--out", str(out)]  # fmt: skip
        assert main(argv) == 0
        error = re.search(r"max relative error (\S+)", capsys.readouterr().out).group(1)
        assert float(error) < 1e-12
        df = pd.read_csv(out / "components.csv")
        shares = df[df["metric"] == "share"].groupby("sample")["value"].sum()
        assert shares.tolist() == pytest.approx([1.0, 1.0], abs=1e-12)
