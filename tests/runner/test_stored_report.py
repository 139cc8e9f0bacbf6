"""A run whose every unit is stored keeps the report built from those same results by the
same code (`report.stored_report`), and builds it again when anything it depends on changed."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import tiny_experiment
from tiny_experiment import TINY

from rankcollapse.report import build
from rankcollapse.runner import run_experiment


def counting_experiment(seen: list[int]):
    """TINY whose summarize counts its calls (the same function object for every run)."""

    def summarize(config, results):
        seen.append(1)
        return tiny_experiment.summarize(config, results)

    return dataclasses.replace(TINY, summarize=summarize)


def run(experiment, tmp_path, **kwargs):
    return run_experiment(
        experiment, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run", **kwargs
    )


def claims_of(result):
    return [(c.id, c.kind, c.verdict, c.measured, c.expected) for c in result.claims]


def test_a_fully_stored_run_keeps_its_report_and_reads_its_claims_back(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    first = run(experiment, tmp_path)
    page = tmp_path / "run" / "report.html"
    stamp = page.stat().st_mtime_ns
    again = run(experiment, tmp_path)
    assert (again.n_computed, len(seen)) == (0, 1)  # summarized once: by the first run
    assert page.stat().st_mtime_ns == stamp
    assert claims_of(again) == claims_of(first)
    assert list(again.summary.tables) == ["mean-per-layer"]  # read back from tables/
    assert again.summary.tables["mean-per-layer"]["value"].tolist() == (
        first.summary.tables["mean per layer"]["value"].tolist()
    )
    assert again.results.equals(first.results)


def test_the_report_is_built_again_when_the_code_changed(tmp_path, monkeypatch):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path)
    monkeypatch.setattr(build, "code_digest", lambda: "edited")
    run(experiment, tmp_path)
    run(experiment, tmp_path)  # built by the edited code: kept again
    assert len(seen) == 2


def test_the_report_is_built_again_for_figures_a_no_figures_run_did_not_draw(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path, figures=False)
    assert not (tmp_path / "run" / "figures").exists()
    run(experiment, tmp_path)
    assert len(seen) == 2
    assert (tmp_path / "run" / "figures" / "res-vs-layer.png").is_file()


def test_a_damaged_claims_file_makes_the_run_build_the_report_again(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path)
    claims = tmp_path / "run" / "claims.json"
    claims.write_text('[{"id": "positive"}]')
    again = run(experiment, tmp_path)
    assert len(seen) == 2
    assert [c["id"] for c in json.loads(claims.read_text())] == ["positive", "impossible"]
    assert [c.id for c in again.claims] == ["positive", "impossible"]


def test_a_fully_stored_cli_run_imports_no_torch_pandas_or_numpy(tmp_path):
    """Nothing to compute and the report current: no unit, no device, so no torch; the rows
    are neither built nor read, so no pandas or numpy (most of such a run's time); the same
    lines are printed and the same files left as after the run that computed them."""
    out = tmp_path / "toy"
    argv = ["run", "toy-collapse", "--set", "seeds=[0]", "--out", str(out), "--jobs"]
    program = (
        "import sys; from rankcollapse.cli import main; code = main(sys.argv[1:]); "
        "print(*(m in sys.modules for m in ('torch', 'pandas', 'numpy')), file=sys.stderr); "
        "sys.exit(code)"
    )
    command = [sys.executable, "-c", program, *argv]
    first = subprocess.run([*command, "1"], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    files = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # two workers: none is started, and no unit's time is estimated (numpy)
    again = subprocess.run([*command, "2"], capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stderr
    assert first.stderr.split()[-3:] == ["True"] * 3  # the check sees them when units run here
    assert again.stderr.split()[-3:] == ["False"] * 3
    assert again.stdout == first.stdout.replace("6 units run, 0 reused", "0 units run, 6 reused")
    changed = {p.name for p, data in files.items() if p.read_bytes() != data}
    assert changed == {"manifest.json", ".lock"}  # its times; the lock's holder
    assert {p for p in out.rglob("*") if p.is_file()} == set(files)


def test_a_stored_run_writes_results_csv_again_only_when_it_differs_from_its_units(tmp_path):
    """results.csv is kept when it is what the last complete run wrote from these unit files
    (the manifest's rows_sha256 and results_sha256), else written again from the units."""
    first = run(TINY, tmp_path)
    csv = tmp_path / "run" / "results.csv"
    whole, stamp = csv.read_bytes(), csv.stat().st_mtime_ns
    run(TINY, tmp_path)
    assert csv.stat().st_mtime_ns == stamp  # kept, not written again
    csv.write_bytes(whole.replace(b"\n", b"\r\n"))  # the same table, other bytes
    again = run(TINY, tmp_path)
    assert csv.read_bytes() == whole and again.n_computed == 0
    assert again.results.equals(first.results)
    unit = sorted((tmp_path / "run" / "units").glob("*.json"))[0]
    unit.write_bytes(unit.read_bytes()[:-20])  # damaged: recomputed, results.csv written anew
    assert run(TINY, tmp_path).n_computed == 1 and csv.read_bytes() == whole


def test_a_file_of_the_users_in_tables_is_no_table_of_the_stored_report(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path)
    (tmp_path / "run" / "tables" / "mine.csv").write_text("layer,value\n1,2.0\n")
    again = run(experiment, tmp_path)
    assert len(seen) == 1 and list(again.summary.tables) == ["mean-per-layer"]
    assert (tmp_path / "run" / "tables" / "mine.csv").read_text() == "layer,value\n1,2.0\n"


def test_a_report_page_cut_short_or_added_to_is_built_again(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path)
    page = tmp_path / "run" / "report.html"
    whole = page.read_bytes()
    page.write_bytes(whole[: len(whole) // 2])
    run(experiment, tmp_path)
    assert page.read_bytes().endswith(b"</body></html>\n") and len(seen) == 2  # whole again
    page.write_bytes(whole + b"<p>an edit</p>\n")
    run(experiment, tmp_path)
    assert b"an edit" not in page.read_bytes() and len(seen) == 3


def test_a_damaged_table_makes_the_run_build_the_report_again(tmp_path):
    seen: list[int] = []
    experiment = counting_experiment(seen)
    run(experiment, tmp_path)
    table = tmp_path / "run" / "tables" / "mean-per-layer.csv"
    whole = table.read_bytes()
    table.write_bytes(b"layer,value\n1," + b"9" * 2_000_000 + b"\n")  # a line no table of ours has
    run(experiment, tmp_path)
    assert len(seen) == 2 and table.read_bytes() == whole
