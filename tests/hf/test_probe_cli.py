"""`rankcollapse probe` and `rankcollapse variants` end to end (small sizes)."""

import pandas as pd
import pytest

from rankcollapse.cli import main


@pytest.mark.slow  # loads MiniLM and draws a figure
def test_probe_writes_results_and_figure(tmp_path, capsys):
    code = main(
        ["probe", "minilm", "--variants", "san,transformer", "--samples", "2", "--tokens", "16",
         "--metrics", "res_comp_rel", "--out", str(tmp_path)]
    )  # fmt: skip
    assert code == 0
    df = pd.read_csv(tmp_path / "results.csv")
    for column in ["model", "init", "variant", "mask", "layer", "sample", "metric", "value"]:
        assert column in df.columns
    assert set(df["variant"]) == {"san", "transformer"} and df["layer"].max() == 6
    assert (tmp_path / "collapse.png").is_file()
    assert "variant san" in capsys.readouterr().out


def test_probe_unknown_model_fails_with_known_names(capsys):
    assert main(["probe", "minilm6"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'minilm6'" in err and "smollm2" in err


def test_probe_empty_text_file_fails_clearly(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert main(["probe", "minilm", "--text", str(empty), "--samples", "1", "--tokens", "8"]) == 2
    assert "is empty" in capsys.readouterr().err


def test_variants_lists_every_variant_with_its_meaning_per_architecture(capsys):
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    for name in ["san+mlp", "wu:san+skip+ln", "attention.output.LayerNorm", "input_layernorm"]:
        assert name in out
