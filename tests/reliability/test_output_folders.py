"""One output-folder rule for every command that writes: a folder (or one that can be made),
never a file, a device or a path under a file; a folder holding someone else's files is
refused, never overwritten; a folder holding a run of another config is refused, never mixed.
Each refusal is one line and exit code 2, before any work, and changes nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.experiments import _registry
from rankcollapse.hf import tiny_model


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    np.save(folder / "acts.npy", np.random.default_rng(0).standard_normal((2, 2, 4, 3)))
    tiny_model("gpt2").save_pretrained(folder / "gpt")
    (folder / "results").mkdir()
    (folder / "results" / "results.csv").write_text("layer,metric,value\n0,res_comp_rel,1.0\n")
    return folder


def commands(inputs: Path, out: str) -> dict[str, list[str]]:
    """Every command that takes --out, with inputs that are valid."""
    small = ["--n-samples", "2", "--n-tokens", "4", "--metrics", "res_comp_rel"]
    return {
        "measure": ["measure", str(inputs / "acts.npy"), "--out", out],
        "simulate": ["simulate", "--n-layers", "2", *small, "--out", out],
        "probe": ["probe", str(inputs / "gpt"), "--random-tokens", *small, "--out", out],
        "qk-rank": ["qk-rank", str(inputs / "gpt"), "--init", "random", "--out", out],
        "run": ["run", "tiny", "--set", "items=1", f"log_dir={inputs}", "--out", out],
        "reproduce": ["reproduce", "--results", str(inputs), "--out", out],
        "compare": ["compare", str(inputs / "results"), "--out", out],
        "paths": ["paths", "count", "--arch", "bert-base", "--out", out],
    }


def bad_outs(tmp: Path) -> dict[str, tuple[str, str]]:
    """--out values that must be refused, and what the line says."""
    (tmp / "notes.txt").write_text("my notes\n")
    (tmp / "mine").mkdir()
    (tmp / "mine" / "results.csv").write_text("my own results\n")
    return {
        "a file": (str(tmp / "notes.txt"), "is a file; pass a folder (it is created if missing)"),
        "under a file": (str(tmp / "notes.txt" / "sub"), "which is a file; pass a folder"),
        "a device": ("/dev/null", "is not a folder (a device or a special file)"),
        "uncreatable": ("/proc/rankcollapse/out", "pass --out in a folder you can write"),
        "someone else's": (str(tmp / "mine"), "holds files rankcollapse did not write"),
    }


@pytest.mark.parametrize("command", ["measure", "simulate", "probe", "qk-rank", "run",
                                     "reproduce", "compare", "paths"])  # fmt: skip
@pytest.mark.parametrize("bad", ["a file", "under a file", "a device", "uncreatable",
                                 "someone else's"])  # fmt: skip
def test_every_command_refuses_an_output_that_is_not_a_folder_of_its_own(
    command, bad, inputs, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    monkeypatch.chdir(tmp_path)
    out, says = bad_outs(tmp_path)[bad]
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(commands(inputs, out)[command]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_run_refuses_a_folder_holding_the_users_own_results(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "results.csv").write_text("my own results\n")
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(mine)]
    assert main(argv) == 2
    assert "holds files rankcollapse did not write (results.csv)" in capsys.readouterr().err
    assert (mine / "results.csv").read_text() == "my own results\n"
    assert sorted(p.name for p in mine.iterdir()) == ["results.csv"]


def test_two_runs_of_different_configs_into_one_folder_are_never_mixed(
    inputs, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    out = tmp_path / "out"
    first = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(out)]
    assert main(first) == 0
    results = (out / "results.csv").read_bytes()
    assert main([*first[:-2], "net.depth=2", "--out", str(out)]) == 2
    assert "holds a run of another config" in capsys.readouterr().err
    assert (out / "results.csv").read_bytes() == results
    assert main(first) == 0  # the same config again: its folder, its units reused
    assert "0 units run, 2 reused" in capsys.readouterr().out


def test_a_command_reuses_its_own_folder_and_refuses_another_commands(tmp_path, capsys):
    out = str(tmp_path / "sim")
    argv = ["simulate", "--n-layers", "2", "--n-samples", "2", "--n-tokens", "4", "--out", out]
    assert main(argv) == 0 and main(argv) == 0
    assert "overwriting the earlier results in" in capsys.readouterr().out
    assert main(["compare", out, "--out", out]) == 2
    assert "holds the output of `rankcollapse simulate`" in capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "sim"), "--skip", "on"]) == 2
    assert "holds a run of another config" in capsys.readouterr().err


def test_compare_writes_a_new_folder_per_call(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sim = ["simulate", "--n-layers", "2", "--n-samples", "2", "--n-tokens", "4", "--out", "s"]
    assert main(sim) == 0
    for _ in range(2):
        assert main(["compare", "s"]) == 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["compare", "compare-2"]


@pytest.mark.parametrize("what", ["a unit file is a folder", "the units folder is a file"])
def test_a_run_folder_with_a_folder_for_a_file_is_named_and_left_alone(
    what, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    out = tmp_path / "out"
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out", str(out)]
    assert main(argv) == 0
    units = out / "units"
    if what == "a unit file is a folder":
        target = min(units.iterdir())
        target.unlink()
        (target / "inside").mkdir(parents=True)
    else:
        for unit in units.iterdir():
            unit.unlink()
        units.rmdir()
        units.write_text("not a folder\n")
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().startswith("error: ") and len(err.strip().splitlines()) == 1
    assert "where a unit file belongs" in err or "where the units folder belongs" in err
    assert "move it away" in err
    assert units.exists() and (what != "a unit file is a folder" or (target / "inside").is_dir())
