"""Results folders read as data: a damaged file is named in one line with the fix
(`report`), and `report --index` and `reproduce` skip a damaged run with a line saying so
and list the others."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from fifos import fifo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.experiments import _registry
from rankcollapse.files import digest
from rankcollapse.runner import run_experiment


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """root/tiny/<hash>/ twice: two finished runs of two configs."""
    root = tmp_path_factory.mktemp("stored") / "root"
    for items in (1, 2):
        run_experiment(TINY, overrides={"log_dir": str(root.parent), "items": items},
                       results_root=root)  # fmt: skip
    return root


@pytest.fixture
def root(stored, tmp_path, monkeypatch) -> Path:
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    copy = tmp_path / "root"
    shutil.copytree(stored, copy)
    return copy


def runs(root: Path) -> list[Path]:
    return sorted((root / "tiny").iterdir(), key=lambda p: json.loads(
        (p / "manifest.json").read_text())["overrides"]["items"])  # fmt: skip


def without_sha(folder: Path) -> None:
    """As a run of an older version wrote it: no sha256 of results.csv in the manifest."""
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["results_sha256"]
    (folder / "manifest.json").write_text(json.dumps(manifest))


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6)
)  # 10**7 values written out in 8 lines


pytestmark = pytest.mark.usefixtures("no_hang")  # a FIFO opened fails, never hangs


DAMAGE = {
    "results.csv truncated": (
        lambda f: (
            without_sha(f),
            (f / "results.csv").write_bytes((f / "results.csv").read_bytes()[:-30]),
        ),
        "r:results.csv is damaged \\(line \\d+ has 3 of 6 columns\\)",
    ),
    "results.csv empty": (
        lambda f: (f / "results.csv").write_bytes(b""),
        "results.csv is damaged (empty)",
    ),
    "results.csv binary": (
        lambda f: (f / "results.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00"),
        "results.csv is damaged (line 3 holds binary data (a NUL byte))",
    ),
    "results.csv edited": (
        lambda f: (f / "results.csv").write_text(
            (f / "results.csv").read_text().replace(",res,0.", ",res,1.", 1)
        ),
        "results.csv is damaged (changed since the run wrote it",
    ),
    "results.csv text in value": (
        lambda f: (
            without_sha(f),
            (f / "results.csv").write_text(
                (f / "results.csv").read_text().replace(",res,0.", ",res,x0.", 1)
            ),
        ),
        "results.csv is damaged (column 'value' should hold numbers; line 2 has",
    ),
    "manifest not JSON": (
        lambda f: (f / "manifest.json").write_text("{"),
        "manifest.json is damaged (not JSON",
    ),
    "manifest a list": (
        lambda f: (f / "manifest.json").write_text("[]"),
        "manifest.json is damaged (holds a JSON list, not an object)",
    ),
    "manifest empty object": (
        lambda f: (f / "manifest.json").write_text("{}"),
        "manifest.json is damaged (experiment: Field required)",
    ),
    "config malformed": (
        lambda f: (f / "config.yaml").write_text("items: [1\n"),
        "config.yaml is damaged (not valid YAML",
    ),
    "config python tag": (
        lambda f: (f / "config.yaml").write_text("items: !!python/object/apply:os.system [ls]\n"),
        "config.yaml is damaged (not valid YAML: could not determine a constructor",
    ),
    "config of another run": (
        lambda f: (f / "config.yaml").write_text(
            (f / "config.yaml").read_text().replace("items: 1", "items: 3")
        ),
        "config.yaml is damaged (not the config the manifest's hash names)",
    ),
    "manifest a FIFO": (
        lambda f: fifo(f / "manifest.json"),
        "manifest.json is damaged (a named pipe (FIFO), not a file; it is never opened)",
    ),
    "config a FIFO": (
        lambda f: fifo(f / "config.yaml"),
        "config.yaml is damaged (a named pipe (FIFO), not a file; it is never opened)",
    ),
    "results.csv a FIFO": (
        lambda f: fifo(f / "results.csv"),
        "results.csv is damaged (a named pipe (FIFO), not a file; it is never opened)",
    ),
    "config billion laughs": (
        lambda f: (f / "config.yaml").write_text(LAUGHS),
        "config.yaml is damaged (YAML that expands to more than 100,000 values (aliases))",
    ),
    "config nested deep": (
        lambda f: (f / "config.yaml").write_text("items: " + "[" * 100 + "]" * 100 + "\n"),
        "config.yaml is damaged (YAML nested more than 64 levels deep)",
    ),
    "figures a file": (
        lambda f: (shutil.rmtree(f / "figures"), (f / "figures").write_text("x")),
        "figures is damaged (a file where the report's folder belongs); remove it and run",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_report_names_the_damaged_file_and_the_fix_in_one_line(damage, root, capsys):
    run = runs(root)[0]
    mutate, says = DAMAGE[damage]
    mutate(run)
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {run}/"), err
    assert re.search(says[2:], err) if says.startswith("r:") else says in err, err


@pytest.mark.parametrize(
    "damage",
    [
        "manifest a list",
        "results.csv empty",
        "config python tag",
        "manifest a FIFO",
        "config a FIFO",
    ],
)
def test_index_and_reproduce_skip_a_damaged_run_and_list_the_others(damage, root, capsys):
    damaged, whole = runs(root)
    DAMAGE[damage][0](damaged)
    (damaged / "claims.json").write_text("[1, 2]")  # what reproduce and the index read
    assert main(["report", "--index", str(root)]) == 0
    printed = capsys.readouterr()
    assert f"note: skipped {damaged}: {damaged}/" in printed.err and "is damaged" in printed.err
    index = (root / "index.html").read_text()
    assert f"{whole.relative_to(root).as_posix()}/report.html" in index
    assert f"{damaged.relative_to(root).as_posix()}/report.html" not in index
    assert main(["reproduce", "--results", str(root)]) == 0
    printed = capsys.readouterr()
    assert (
        f"note: skipped {damaged}" in printed.err
        and "Paper findings: 1 pass, 1 fail" in printed.out
    )
    html = (root / "reproduction.html").read_text()
    assert f'<a href="{whole.relative_to(root).as_posix()}/report.html">tiny</a>' in html


def test_a_run_stored_before_its_experiment_gained_a_config_key_is_still_rebuilt(root):
    """A key added to the experiment later (here `seeds`, with its default) is filled in: the
    manifest's hash is checked against config.yaml as the run stored it, not as it resolves."""
    folder = runs(root)[0]
    values = yaml.safe_load((folder / "config.yaml").read_text())
    del values["seeds"]  # as a version of the experiment without the key stored it
    (folder / "config.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["config_hash"] = digest({"experiment": "tiny", "config": values})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert main(["report", str(folder)]) == 0
    edited = yaml.safe_dump(values | {"items": 3}, sort_keys=False)  # changed after the run
    (folder / "config.yaml").write_text(edited)
    assert main(["report", str(folder)]) != 0
