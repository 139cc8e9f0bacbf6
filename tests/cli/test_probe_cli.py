"""`rankcollapse probe` and `rankcollapse variants` end to end (small sizes)."""

import pandas as pd
import pytest

from rankcollapse.cli import main
from rankcollapse.hf import ARCHITECTURES, MODELS
from rankcollapse.hf.models import tiny_model


@pytest.mark.slow  # loads MiniLM and draws a figure
def test_probe_writes_results_and_figure(tmp_path, capsys):
    code = main(
        ["probe", "minilm", "--variants", "san,transformer", "--n-samples", "2", "--n-tokens", "16",
         "--metrics", "res_comp_rel", "--out", str(tmp_path)]
    )  # fmt: skip
    assert code == 0
    df = pd.read_csv(tmp_path / "results.csv")
    for column in ["model", "init", "variant", "mask", "layer", "sample", "metric", "value"]:
        assert column in df.columns
    assert set(df["variant"]) == {"san", "transformer"} and df["layer"].max() == 6
    assert (tmp_path / "collapse.png").is_file()
    out = capsys.readouterr().out
    # one model: its name heads the table, whose rows are variant and layer
    assert out.startswith(f"wrote {tmp_path / 'results.csv'}\n")  # the table while it draws
    assert "\nminilm (pretrained): its own attention mask, softmax temperature 1" in out
    assert "│ san " in out and "│ transformer │" in out


def test_probe_unknown_model_fails_with_known_names(capsys):
    assert main(["probe", "minilm6"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'minilm6'" in err and "smollm2" in err


def test_probe_empty_text_file_fails_clearly(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert (
        main(["probe", "minilm", "--text", str(empty), "--n-samples", "1", "--n-tokens", "8"]) == 2
    )
    assert "is empty" in capsys.readouterr().err


def test_variants_lists_every_variant_and_family_and_spells_out_the_asked_ones(capsys):
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    for name in ["san+mlp", "wu:san+skip+ln", "dong-authors:san", *ARCHITECTURES]:
        assert name in out
    assert main(["variants", "--arch", "bert", "llama", "albert"]) == 0
    out = capsys.readouterr().out
    for name in ["attention.output.LayerNorm", "input_layernorm", "activation(y)"]:
        assert name in out


def test_probe_of_a_saved_tiny_model_of_every_family_on_random_tokens(tmp_path, capsys):
    dirs = []
    for family in ARCHITECTURES:
        tiny_model(family).save_pretrained(tmp_path / family)  # no tokenizer files
        dirs.append(str(tmp_path / family))
    argv = ["probe", *dirs, "--random-tokens", "--n-samples", "2", "--n-tokens", "6",
            "--metrics", "res_comp_rel", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    df = pd.read_csv(tmp_path / "out" / "results.csv")
    assert sorted(df["model"].unique()) == sorted(dirs)
    assert df.groupby("model")["layer"].max().eq(2).all() and df["value"].notna().all()
    assert (tmp_path / "out" / "collapse.png").is_file()


def test_probe_writes_a_fresh_folder_per_run_and_says_when_it_overwrites(
    tmp_path, monkeypatch, capsys
):
    tiny_model("gpt2").save_pretrained(tmp_path / "gpt")
    monkeypatch.chdir(tmp_path)
    argv = ["probe", "gpt", "--random-tokens", "--n-samples", "1", "--n-tokens", "4",
            "--metrics", "res_comp_rel"]  # fmt: skip
    assert main(argv) == 0 and main(argv) == 0
    assert sorted(p.name for p in (tmp_path / "results" / "probe").iterdir()) == ["gpt", "gpt-2"]
    assert "new folder results/probe/gpt-2" in capsys.readouterr().out
    assert main([*argv, "--out", "results/probe/gpt"]) == 0
    assert "overwriting the earlier results in results/probe/gpt" in capsys.readouterr().out


def test_probe_help_shows_defaults_and_the_model_registry(capsys):
    with pytest.raises(SystemExit):
        main(["probe", "--help"])
    out = capsys.readouterr().out
    assert "(default: 128)" in out and "(default: float32)" in out
    for name in MODELS:
        assert name in out


def test_probe_variant_typo_fails_before_any_model_loads(monkeypatch, capsys):
    from rankcollapse import hf

    def no_load(*args, **kwargs):
        raise AssertionError("the model loaded before the variants were checked")

    monkeypatch.setattr(hf, "load_model", no_load)
    assert main(["probe", "minilm", "--variants", "sna"]) == 2
    assert "unknown variant 'sna'" in capsys.readouterr().err
    for bad, message in (("--mask", "windw:1"), ("--metrics", "res_comp_rl")):
        assert main(["probe", "minilm", bad, message]) == 2
        assert "Did you mean" in capsys.readouterr().err


def test_the_families_title_says_dong_authors_is_not_for_every_family():
    from rankcollapse.cli.variants import families_title, family_rows
    from rankcollapse.hf import VARIANTS

    rows = family_rows()
    n_yes = sum(row["dong-authors"] == "yes" for row in rows)
    assert 0 < n_yes < len(rows)
    title = families_title(rows, VARIANTS)
    assert title == (
        "model families (qk-rank and the dong and wu variants work for every family; "
        f"dong-authors:* for the {n_yes} of {len(rows)} marked yes)"
    )
