"""What a new user meets first: compare on any mix of folders, labelled in words, small
multiples beyond six curves; tables that fit 80 columns; every kind of folder in the index;
a FAIL on screen with its reason; the report's prose without markdown backticks; a failing
unit that leaves its manifest failed; no header-only results."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import _common, _console, main
from rankcollapse.experiments import _registry
from rankcollapse.hf import tiny_model
from rankcollapse.plot import layers

SMALL = ["--n-samples", "2", "--n-tokens", "4", "--metrics", "res_comp_rel"]


@pytest.fixture
def tiny_registered(monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)


def test_compare_of_a_simulate_and_a_probe_folder_labels_curves_in_words(tmp_path, capsys):
    """The README's `compare results/simulate/<hash> results/probe/minilm`: the simulate
    folder has no variant column (NaN once concatenated), which once failed with TypeError."""
    tiny_model("gpt2").save_pretrained(tmp_path / "gpt")
    assert main(["simulate", "--n-layers", "2", "--skip", "on", *SMALL, "--out",
                 str(tmp_path / "sim")]) == 0  # fmt: skip
    assert main(["probe", str(tmp_path / "gpt"), "--random-tokens", "--variants",
                 "san,transformer", *SMALL, "--out", str(tmp_path / "probe")]) == 0  # fmt: skip
    capsys.readouterr()
    out = tmp_path / "cmp"
    assert main(["compare", str(tmp_path / "sim"), str(tmp_path / "probe"), "--out",
                 str(out)]) == 0  # fmt: skip
    columns = list(pd.read_csv(out / "compare.csv").columns)
    assert columns[:2] == ["metric", "layer"]
    model = str(tmp_path / "gpt")
    expected = ["toy network, n_layers=2, skip=on", f"{model} · san", f"{model} · transformer"]
    assert columns[2:] == expected
    assert not any(re.fullmatch(r"[0-9a-f]{10}", c) for c in columns)  # never a config hash


def test_compare_names_each_curve_of_a_simulate_variants_folder_once_by_its_variant(
    tmp_path, capsys
):
    """The folder's label lists its variants for the index ("variants san/san+skip"); in a
    comparison each curve names its own variant instead, and two such folders alike in
    every other word are told apart by their names."""
    for folder, variants in (("sim", "san,san+skip"), ("other", "san,transformer")):
        assert main(["simulate", "--variants", variants, "--n-layers", "2", *SMALL, "--out",
                     str(tmp_path / folder)]) == 0  # fmt: skip
    marker = json.loads((tmp_path / "sim" / ".rankcollapse.json").read_text())
    assert marker["label"] == "toy network, variants san/san+skip, n_layers=2"
    tiny_model("gpt2").save_pretrained(tmp_path / "gpt")
    assert main(["probe", str(tmp_path / "gpt"), "--random-tokens", "--variants", "san",
                 *SMALL, "--out", str(tmp_path / "probe")]) == 0  # fmt: skip
    capsys.readouterr()
    for dirs, expected in (
        (["sim", "probe"], ["toy network, n_layers=2 · san", "toy network, n_layers=2 · san+skip",
                            f"{tmp_path / 'gpt'} · san"]),
        (["sim", "other"], ["sim · san", "sim · san+skip", "other · san", "other · transformer"]),
    ):  # fmt: skip
        out = tmp_path / f"cmp-{dirs[1]}"
        assert main(["compare", *(str(tmp_path / d) for d in dirs), "--out", str(out)]) == 0
        assert list(pd.read_csv(out / "compare.csv").columns)[2:] == expected


def test_more_than_six_curves_become_small_multiples():
    df = pd.DataFrame([{"layer": l, "metric": "mu_rel", "value": 0.5**l + k, "arm": f"arm {k}"}
                       for k in range(8) for l in range(3)])  # fmt: skip
    panels = [ax for ax in layers(df, by="arm").axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == [f"arm {k}" for k in range(8)]
    assert all(len(ax.get_lines()) == 1 for ax in panels)
    assert len(layers(df[df["arm"] < "arm 6"], by="arm").axes) == 1  # six: one panel


def test_compare_table_shows_floor_values_as_reports_do(tmp_path, capsys):
    sim = tmp_path / "sim"
    assert main(["simulate", "--n-layers", "8", "--n-samples", "2", "--n-tokens", "4",
                 "--metrics", "min_sv", "--out", str(sim)]) == 0  # fmt: skip
    assert pd.read_csv(sim / "results.csv")["at_floor"].any()
    capsys.readouterr()
    assert main(["compare", str(sim), "--metrics", "min_sv", "--out", str(tmp_path / "c")]) == 0
    assert "<floor" in capsys.readouterr().out


def test_printed_tables_fit_80_columns(monkeypatch, capsys):
    monkeypatch.setattr(_console, "console", Console(width=80, force_terminal=False))
    metrics = ["res_comp_rel", "res_comp", "rank1_rel", "mu", "mu_rel", "cos_mean",
               "abs_cos_mean", "stable_rank", "effective_rank", "numerical_rank", "min_sv"]  # fmt: skip
    rows = [{"model": "minilm", "variant": v, "layer": l, "metric": m, "value": 0.123456,
             "at_floor": False} for v in ("san", "transformer") for l in range(3)
            for m in metrics]  # fmt: skip
    _common.print_layer_means(pd.DataFrame(rows), "minilm: a long title " * 5,
                              keys=("model", "variant", "layer"))  # fmt: skip
    out = capsys.readouterr().out
    assert max(map(len, out.splitlines())) <= 80 and "…" not in out
    for name in metrics:
        assert name in out
    assert "│ transformer │" in out and "│ minilm" not in out  # one model: named in the title


def test_the_index_lists_simulate_probe_and_compare_folders(tmp_path, capsys, tiny_registered):
    root = tmp_path / "results"
    assert main(["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out",
                 str(root / "tiny" / "a")]) == 0  # fmt: skip
    assert main(["simulate", "--n-layers", "2", *SMALL, "--out", str(root / "sim")]) == 0
    assert main(["compare", str(root / "sim"), "--out", str(root / "cmp")]) == 0
    assert main(["report", "--index", str(root)]) == 0
    index = (root / "index.html").read_text()
    for link in ("tiny/a/report.html", "sim/collapse.png", "cmp/compare.png"):
        assert f'href="{link}"' in index
    assert "toy network" in index


def test_a_fail_on_screen_carries_its_reason(tmp_path, capsys, tiny_registered):
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(tmp_path / "r")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    fail = " ".join(out[out.index("FAIL impossible") :].split())  # the line, as wrapped or not
    assert re.fullmatch(r"FAIL impossible: last mean is [0-9.e-]+, expected > 1e\+09 \(the "
                        r"paper says .*; we measure .* not > 1e\+09\)\.", fail)  # fmt: skip
    assert main(["report", str(tmp_path / "r")]) == 0
    assert "FAIL impossible: last mean is" in capsys.readouterr().out


def test_the_reports_prose_has_no_markdown_backticks(tmp_path, tiny_registered):
    assert main(["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out",
                 str(tmp_path / "r")]) == 0  # fmt: skip
    html = (tmp_path / "r" / "report.html").read_text()
    what_ran = html[html.index('id="what-ran"') : html.index('id="config"')]
    assert "`" not in what_ran and "<code>config.log_dir</code>" in what_ran


def test_a_unit_that_fails_on_a_config_value_leaves_the_manifest_failed_with_why(
    tmp_path, capsys, tiny_registered
):
    (tmp_path / "fail-1").touch()  # the tiny experiment's switch: item 1 raises
    out = tmp_path / "r"
    assert main(["run", "tiny", "--set", f"log_dir={tmp_path}", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert [line.startswith("error:") for line in err.splitlines()].count(True) == 1
    assert "Traceback" not in err
    assert "simulated crash in item 1" in err and "Fix what the error names" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "simulated crash" in manifest["error"]
    assert manifest["failed_unit"]["item"] == 1 and "Traceback" in manifest["traceback"]


@pytest.mark.parametrize("command", [["simulate", "--n-layers", "2"], ["measure", "acts.npy"]])
def test_metrics_naming_no_metric_write_no_header_only_results(command, tmp_path, capsys,
                                                              monkeypatch):  # fmt: skip
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "acts.npy", np.ones((1, 2, 4, 3)))
    assert main([*command, "--metrics", ",", "--out", "out"]) == 2
    assert "--metrics ',' names no metric" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
