"""One output-folder rule for every command that writes: a folder (or one that can be made),
never a file, a device or a path under a file; a folder holding someone else's files is
refused, never overwritten; a folder holding a run of another config is refused, never mixed.
Each refusal is one line and exit code 2, before any work, and changes nothing.

`WRITERS` lists every command that writes, with valid inputs; `PYTHON_WRITERS` is the hook for
classes that write from Python (a monitor's `CsvLog` and `TensorBoardLog` join it: a function
of a folder that writes there), so one parametrized test covers them all."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments import _registry
from rankcollapse.files import MARKER
from rankcollapse.hf import tiny_model
from rankcollapse.measure.monitor import CsvLog, TensorBoardLog, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.report.build import RECORD


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("inputs")
    np.save(folder / "acts.npy", np.random.default_rng(0).standard_normal((2, 2, 4, 3)))
    tiny_model("gpt2").save_pretrained(folder / "gpt")
    (folder / "results").mkdir()
    (folder / "results" / "results.csv").write_text("layer,metric,value\n0,res_comp_rel,1.0\n")
    (folder / "logs").mkdir()
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    logs=[CsvLog(folder / "logs" / "collapse.csv")])  # fmt: skip
    for step in range(2):
        monitor.step(step)
    with pytest.MonkeyPatch.context() as patch:  # a stored run, for reproduce to read
        patch.setitem(_registry._REGISTRY, "tiny", TINY)
        run = ["run", "tiny", "--set", "items=1", f"log_dir={folder}", "--no-figures"]
        assert main([*run, "--out", str(folder / "runs" / "tiny" / "quick")]) == 0
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
        "reproduce": ["reproduce", "--results", str(inputs / "runs"), "--out", out],
        "compare": ["compare", str(inputs / "results"), "--out", out],
        "paths": ["paths", "count", "--arch", "bert-base", "--out", out],
        "paths decompose": ["paths", "decompose", "--n-layers", "2", "--d-model", "8", *small[:4],
                            "--out", out],
        "paths products": ["paths", "products", "--n-layers", "2", "--d-model", "8", *small[:4],
                           "--n-paths", "2", "--out", out],
        "plot-training": ["plot-training", str(inputs / "logs" / "collapse.csv"), "--out", out],
    }  # fmt: skip


WRITERS = ["measure", "simulate", "probe", "qk-rank", "run", "reproduce", "compare", "paths",
           "paths decompose", "paths products", "plot-training"]  # fmt: skip


def _monitor_steps(log: object) -> None:
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    logs=[log])  # fmt: skip
    for step in range(2):
        monitor.step(step)


# Python classes that write, by name: a function given the path of a user's own file, which
# points the writer at it (the file itself, or its folder) and writes.
PYTHON_WRITERS = {
    "CsvLog": lambda mine: _monitor_steps(CsvLog(mine)),
    "TensorBoardLog": lambda mine: _monitor_steps(TensorBoardLog(mine.parent)),
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
        "uncreatable": ("/proc/rankcollapse/out", "write to a folder you can write"),
        "someone else's": (str(tmp / "mine"), "holds files rankcollapse did not write"),
        "a name too long": (str(tmp / ("x" * 300)), "longer than the file system allows"),
    }


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("bad", ["a file", "under a file", "a device", "uncreatable",
                                 "someone else's", "a name too long"])  # fmt: skip
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


def _written(root: Path, before: dict[Path, tuple[int, int]]) -> list[Path]:
    """The files under `root` that are new or were rewritten (a new inode or time) since
    `before` (path -> (inode, mtime))."""
    return sorted(p for p in root.rglob("*") if p.is_file() and _stamp(p) != before.get(p))


def _stamp(path: Path) -> tuple[int, int]:
    return path.stat().st_ino, path.stat().st_mtime_ns


def _stamps(root: Path) -> dict[Path, tuple[int, int]]:
    return {p: _stamp(p) for p in root.rglob("*") if p.is_file()}


# Commands that write into a folder they are given, not an --out: a run's folder (`report`
# rebuilds report.html, claims.json, figures/ and tables/ there) and a results folder
# (`report --index` writes index.html there); `run` makes it first.
IN_PLACE = {"report": ["report", "run"], "report --index": ["report", "--index", "."]}


@pytest.mark.parametrize("command", [*WRITERS, *IN_PLACE])
def test_no_writer_replaces_a_file_it_did_not_write(command, inputs, tmp_path, capsys, monkeypatch):
    """Each writer runs once with its default output (no --out); every file it wrote is then
    replaced by a user's file of that name (its folder marker removed); a second call must
    leave every one of them as the user wrote it: it writes elsewhere, or refuses."""
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    monkeypatch.chdir(tmp_path)
    if command in IN_PLACE:
        run = ["run", "tiny", "--set", "items=1", f"log_dir={inputs}", "--out", "run"]
        assert main(run) == 0, capsys.readouterr()
    argv = IN_PLACE.get(command) or commands(inputs, "-")[command][:-2]  # without --out
    before, mine = _stamps(inputs), _stamps(tmp_path)
    time.sleep(0.01)  # a file rewritten in place gets a later mtime
    assert main(argv) == 0, capsys.readouterr()
    changed = _written(tmp_path, mine) + _written(inputs, before)
    written = [p for p in changed if p.name not in (MARKER, ".lock", RECORD)]
    assert written, f"{command} wrote nothing"
    for path in changed:
        path.unlink()
    for path in written:
        path.write_text("the user's own file\n")
    capsys.readouterr()
    code = main(argv)
    printed = capsys.readouterr()
    assert code in (0, 2) and "Traceback" not in printed.err, printed
    for path in written:  # left as it was, or kept beside (NAME.mine) and said so
        aside = path.with_name(f"{path.name}.mine")
        kept = aside.is_file() and f"kept {path.relative_to(tmp_path)} as" in printed.err
        assert (aside if kept else path).read_text() == "the user's own file\n", (path, printed)
    for path in written:  # inputs are shared by the module's tests
        path.unlink() if inputs in path.parents else None


@pytest.mark.parametrize("name", sorted(PYTHON_WRITERS))
def test_no_python_writer_replaces_a_file_it_did_not_write(name, tmp_path):
    if name == "TensorBoardLog":
        pytest.importorskip("tensorboard", reason="TensorBoardLog needs the tensorboard extra")
    mine = tmp_path / "events.out.tfevents.mine.csv"
    mine.write_text("step,notes\n0,the user's own file\n")
    with contextlib.suppress(RankCollapseError):  # refused: fine, if nothing was replaced
        PYTHON_WRITERS[name](mine)
    assert mine.read_text() == "step,notes\n0,the user's own file\n"


def test_plot_training_never_writes_beside_the_logs_and_names_its_figures_by_metric(
    inputs, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    log = inputs / "logs" / "collapse.csv"
    for metric in ("res_comp_rel", "stable_rank"):
        assert main(["plot-training", str(log), "--metric", metric, "--out", "figs"]) == 0
    assert sorted(p.name for p in (inputs / "logs").iterdir()) == [
        "collapse.csv",
        "collapse.csv.setup.json",  # the monitor's own record of its setup
    ]
    names = sorted(p.name for p in (tmp_path / "figs").iterdir() if p.suffix == ".png")
    assert names == [f"training-{kind}-{metric}.png" for kind in ("curves", "heatmap")
                     for metric in ("res_comp_rel", "stable_rank")]  # fmt: skip
    assert main(["plot-training", str(log)]) == 0
    assert (tmp_path / "results" / "plot-training" / "collapse").is_dir()


def test_paths_count_writes_a_folder_per_config(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["paths", "count", "--arch", "bert-base", "llama-small"]) == 0
    first = (tmp_path / "results" / "paths-count" / "paths.csv").read_bytes()
    assert main(["paths", "count", "--arch", "gpt2"]) == 0
    assert "writing to a new folder results/paths-count-2" in capsys.readouterr().out
    assert (tmp_path / "results" / "paths-count" / "paths.csv").read_bytes() == first
    assert b"gpt2" in (tmp_path / "results" / "paths-count-2" / "paths.csv").read_bytes()
    assert main(["paths", "count", "--arch", "bert-base", "llama-small"]) == 0  # its own again
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "paths-count", "paths-count-2"]  # fmt: skip


def test_paths_decompose_writes_a_folder_per_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    toy = ["paths", "decompose", "--d-model", "8", "--n-samples", "2", "--n-tokens", "4"]
    for layers in ("2", "3"):
        assert main([*toy, "--n-layers", layers]) == 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == [
        "paths-decompose", "paths-decompose-2"]  # fmt: skip


def test_reproduce_refuses_a_preset_with_no_run_and_never_replaces_a_users_file(
    inputs, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    results = tmp_path / "results"
    run = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--out"]
    assert main([*run, str(results / "tiny" / "quick")]) == 0
    assert main(["reproduce", "--results", str(results)]) == 0
    table = (results / "reproduction.md").read_bytes()
    capsys.readouterr()
    assert main(["reproduce", "--preset", "paper", "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert "no complete run of preset 'paper'" in err and "stored presets: quick" in err
    assert (results / "reproduction.md").read_bytes() == table
    assert not (results / "reproduction-paper.md").exists()
    assert main(["reproduce", "--preset", "quick", "--results", str(results)]) == 0
    assert (results / "reproduction-quick.md").is_file()
    (results / "reproduction.md").write_text("# my own notes\n")
    assert main(["reproduce", "--results", str(results)]) == 2
    assert "was not written by rankcollapse" in capsys.readouterr().err
    assert (results / "reproduction.md").read_text() == "# my own notes\n"


def test_a_terminal_that_cannot_show_a_name_gets_it_escaped(inputs, tmp_path):
    import os
    import shutil
    import subprocess

    model = tmp_path / "modèle-ü"
    shutil.copytree(inputs / "gpt", model)
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    argv = [sys.executable, "-m", "rankcollapse.cli", "probe", str(model), "--random-tokens",
            "--n-samples", "2", "--n-tokens", "4", "--no-figures", "--metrics", "res_comp_rel",
            "--out", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "mod\\xe8le-\\xfc" in done.stdout and "Traceback" not in done.stderr


def test_report_keeps_a_changed_table_aside_and_leaves_other_files_alone(
    inputs, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    monkeypatch.chdir(tmp_path)
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={inputs}", "--out", "run"]
    assert main(argv) == 0 and main(["report", "run"]) == 0  # its own files: rebuilt
    assert "kept" not in capsys.readouterr().err
    table = next(Path("run/tables").iterdir())
    whole = table.read_bytes()
    table.write_text("my own table\n")
    Path("run/tables/notes.csv").write_text("my notes\n")  # never written by a report
    assert main(["report", "run"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"kept {table} as {table}.mine: the last report did not write it" in err, err
    assert Path(f"{table}.mine").read_text() == "my own table\n" and table.read_bytes() == whole
    assert Path("run/tables/notes.csv").read_text() == "my notes\n"
    Path(f"{table}.mine").unlink()
    Path("run", RECORD).unlink()  # a run folder of an older version: report.html's own mark
    assert main(["report", "run"]) == 0 and Path("run", RECORD).is_file()
    assert "kept" not in capsys.readouterr().err
    Path("run", RECORD).unlink()
    Path("run/report.html").write_text("<html>my page</html>\n")
    assert main(["report", "run"]) == 0
    assert "kept run/report.html as run/report.html.mine" in capsys.readouterr().err
    assert Path("run/report.html.mine").read_text() == "<html>my page</html>\n"


def test_report_index_refuses_a_users_own_index_page(inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={inputs}", "--out", str(tmp_path / "r")]
    assert main(argv) == 0 and main(["report", "--index", str(tmp_path)]) == 0
    assert main(["report", "--index", str(tmp_path)]) == 0  # its own page: replaced
    (tmp_path / "index.html").write_text("my own index\n")
    capsys.readouterr()
    assert main(["report", "--index", str(tmp_path)]) == 2
    assert "index.html' exists and was not written by rankcollapse" in capsys.readouterr().err
    assert (tmp_path / "index.html").read_text() == "my own index\n"
