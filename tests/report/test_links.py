"""A results folder is a closed world: a symbolic link inside a run folder (to a file, a folder,
tables/, figures/, config.yaml, claims.json, results.csv, report.html) is refused by every
reader and writer (`report`, `report --index`, `reproduce`, a resumed `run`), never followed: nothing outside
is opened, printed or written. Names that are not UTF-8 are shown escaped."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.experiments import _registry
from rankcollapse.reading import LinkInsideError
from rankcollapse.runner import run_experiment

SECRET = "root:$6$s3cr3t-hash:19000:0:99999:7:::"
OPENED: list[str] = []  # every path opened while a test listens (`listening`)
_listening = [False]


def _audit(event: str, args: tuple) -> None:
    if _listening[0] and event == "open" and isinstance(args[0], str | bytes | os.PathLike):
        OPENED.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_audit)  # audit hooks stay for the process: it records only while listening


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """root/tiny/<hash>/: one finished run with its report, figures and tables."""
    root = tmp_path_factory.mktemp("stored") / "root"
    run_experiment(TINY, overrides={"log_dir": str(root.parent)}, results_root=root)
    return root


@pytest.fixture
def world(stored, tmp_path, monkeypatch) -> tuple[Path, Path, Path]:
    """(results root, its run folder, an outside folder holding the user's files); the run's
    --set values are `stored.parent`'s log_dir."""
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    root = tmp_path / "root"
    shutil.copytree(stored, root)
    outside = tmp_path / "outside"
    (outside / "mine").mkdir(parents=True)
    (outside / "secret").write_text(SECRET + "\n")
    run = next((root / "tiny").iterdir())
    for folder in ("tables", "figures"):  # the user's files, named as the report names its own
        for name in os.listdir(run / folder):
            (outside / "mine" / name).write_text(SECRET)
    return root, run, outside


def _replace(path: Path, target: Path) -> None:
    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    path.symlink_to(target)


LINKS = {  # where the link is planted -> what it points to (in the outside folder)
    "file": ("notes.txt", "secret"),
    "folder": ("extra", "mine"),
    "tables/": ("tables", "mine"),
    "figures/": ("figures", "mine"),
    "config.yaml": ("config.yaml", "secret"),
    "claims.json": ("claims.json", "secret"),
    "results.csv": ("results.csv", "secret"),
    "report.html": ("report.html", "secret"),
    "manifest.json": ("manifest.json", "secret"),
    "a file in tables/": ("tables/notes.csv", "secret"),
    ".lock": (".lock", "missing-lock"),  # a lock opened through it would create the target
}


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _listen(call):
    OPENED.clear()
    _listening[0] = True
    try:
        return call()
    finally:
        _listening[0] = False


@pytest.mark.parametrize("where", LINKS)
def test_a_link_in_a_run_folder_is_refused_and_nothing_outside_is_read_printed_or_written(
    stored, world, where, capsys
):
    root, run, outside = world
    name, target = LINKS[where]
    _replace(run / name, outside / target)
    before = _snapshot(outside)

    code = _listen(lambda: main(["report", str(run)]))
    out = capsys.readouterr()
    assert code != 0
    assert f"{run / name} is a symbolic link inside the run folder" in " ".join(out.err.split())
    assert "Traceback" not in out.err and SECRET not in out.out + out.err

    _listen(lambda: main(["report", "--index", str(root)]))
    out = capsys.readouterr()
    assert f"skipped {run}" in " ".join(out.err.split())
    assert SECRET not in out.out + out.err
    assert not (root / "index.html").exists()  # its one run skipped: no run to list

    _listen(lambda: main(["reproduce", "--preset", "quick", "--results", str(root)]))
    out = capsys.readouterr()
    assert f"skipped {run}" in " ".join(out.err.split())
    assert SECRET not in out.out + out.err

    with pytest.raises(LinkInsideError, match="symbolic link inside the run folder"):
        _listen(lambda: run_experiment(TINY, overrides={"log_dir": str(stored.parent)},
                                       results_root=root))  # fmt: skip

    assert _snapshot(outside) == before  # nothing written, renamed or removed
    assert not [p for p in OPENED if Path(p).is_relative_to(outside.resolve())]
    assert not list(outside.rglob("*.mine*")) and not (outside / "missing-lock").exists()


def test_an_index_html_that_is_a_link_is_refused(world, capsys):
    root, _, outside = world
    (root / "index.html").symlink_to(outside / "secret")
    assert main(["report", "--index", str(root)]) != 0
    out = capsys.readouterr()
    assert "index.html' is a symbolic link" in " ".join(out.err.split())
    assert SECRET not in out.out + out.err
    assert (outside / "secret").read_text() == SECRET + "\n"


def test_a_link_to_a_folder_under_the_results_root_is_named_and_left(world, capsys):
    root, _, outside = world
    (root / "elsewhere").symlink_to(outside / "mine")
    assert _listen(lambda: main(["report", "--index", str(root)])) == 0
    assert f"skipped {root / 'elsewhere'}: a symbolic link" in capsys.readouterr().err
    assert not [p for p in OPENED if Path(p).is_relative_to(outside.resolve())]


def test_report_index_shows_a_run_folder_named_in_bytes_escaped(world, capsys):
    root, run, _ = world
    named = run.with_name(os.fsdecode(b"run-\xff\xfe"))
    run.rename(named)
    assert main(["report", "--index", str(root)]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    page = (root / "index.html").read_text()
    assert 'href="tiny/run-%FF%FE/report.html"' in page
    assert "tiny/run-\\xff\\xfe/report.html</a>" in page
    assert main(["report", str(named)]) == 0
    assert "run-\\xff\\xfe/report.html" in capsys.readouterr().out


def test_a_yaml_error_names_the_line_never_its_text(world, capsys):
    _, run, _ = world
    (run / "config.yaml").write_text(f"items: [{SECRET}\n")
    assert main(["report", str(run)]) != 0
    err = " ".join(capsys.readouterr().err.split())
    assert "config.yaml is damaged (not valid YAML:" in err and "at line 2, column 1" in err
    assert SECRET not in err and "s3cr3t" not in err
