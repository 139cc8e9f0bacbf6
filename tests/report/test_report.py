"""The report: one self-contained HTML file with every figure and the claims table, rebuilt
byte for byte from the stored results by `build_report` and `rankcollapse report DIR`."""

from __future__ import annotations

import base64
import dataclasses
import re

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel, ConfigDict, Field

from rankcollapse import cli
from rankcollapse.errors import InputError
from rankcollapse.experiments import (
    Assumption,
    Claim,
    Experiment,
    Quote,
    Summary,
    _registry,
    check,
    finding,
)
from rankcollapse.plot import band_plot, heatmap
from rankcollapse.report import build_report, render_html, tidy_table, write_index
from rankcollapse.runner import run_experiment


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    depth: int = Field(3, ge=1)
    seeds: list[int] = [0, 1]


def units(config: Config) -> list[dict]:
    return [{"variant": v, "seed": s} for v in ("san", "skip") for s in config.seeds]


def run_unit(config: Config, unit: dict) -> pd.DataFrame:
    rng = np.random.default_rng(unit["seed"])
    rate = 0.1 if unit["variant"] == "san" else 0.9
    values = rate ** np.arange(config.depth + 1) * (
        1 + 0.01 * rng.standard_normal(config.depth + 1)
    )
    return pd.DataFrame(
        {
            **unit,
            "layer": range(config.depth + 1),
            "metric": "res",
            "value": values,
            "at_floor": False,
        }
    )


def summarize(config: Config, results: pd.DataFrame) -> Summary:
    last = results[results["layer"] == config.depth]
    san, skip = (last[last["variant"] == v]["value"] for v in ("san", "skip"))  # one per seed
    says = Quote("pure attention collapses", "a test")
    table = results.pivot_table(index="layer", columns="variant", values="value").reset_index()
    return Summary(
        tables={"mean residual": table},
        figures={
            "residual vs layer": band_plot(results, title="residual <&> per layer"),
            "heat": heatmap(table[["san", "skip"]].to_numpy()),
        },
        claims=[
            finding(
                "san-collapses",
                says=says,
                text="pure attention collapses",
                quantity="san last",
                values=san,
                side="<",
                margin=0.01,
            ),
            finding(
                "skip-collapses",
                says=says,
                text="skips collapse too",
                quantity="skip last",
                values=skip,
                side="<",
                margin=0.01,
            ),
        ],
        notes=["values are synthetic"],
    )


SYNTH = Experiment("synth", "Synthetic decay for report tests.", Config,
                   {"quick": {}, "paper": {"depth": 12}}, units, run_unit, summarize)  # fmt: skip


def never(config: Config, unit: dict) -> pd.DataFrame:
    raise AssertionError("a report must not run units")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return run_experiment(SYNTH, out=tmp_path_factory.mktemp("report") / "run")


def test_report_embeds_every_figure_as_png_and_needs_nothing_online(run):
    html = run.report_path.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) == 2
    figures = sorted(p.read_bytes() for p in (run.out_dir / "figures").glob("*.png"))
    assert sorted(base64.b64decode(i) for i in images) == figures
    assert "residual vs layer" in html and "heat" in html
    assert not re.search(r'(src|href)="(https?:)?//', html)


def test_every_figure_has_a_200_dpi_png_and_an_svg_copy_linked_from_the_report(run):
    html = run.report_path.read_text()
    names = sorted(p.name for p in (run.out_dir / "figures").iterdir())
    assert names == ["heat.png", "heat.svg", "residual-vs-layer.png", "residual-vs-layer.svg"]
    for svg in ("heat.svg", "residual-vs-layer.svg"):
        assert (run.out_dir / "figures" / svg).read_bytes().lstrip().startswith(b"<?xml")
        assert f'href="figures/{svg}"' in html
    png = (run.out_dir / "figures" / "residual-vs-layer.png").read_bytes()
    width = int.from_bytes(png[16:20], "big")  # IHDR: the PNG's width in pixels
    drawn = int(re.search(r'alt="residual vs layer" width="(\d+)"', html).group(1))
    assert width >= 1.5 * drawn  # sharp at the size the page draws it


def test_report_reads_summary_first_then_contents_figures_findings_tables(run):
    html = run.report_path.read_text()
    order = ["paper findings: 1 of 2 pass", "In the results, variant: san, skip.", "<nav>",
             'id="figures"', 'id="findings"', 'id="tables"', 'id="config"']  # fmt: skip
    positions = [html.index(text) for text in order]
    assert positions == sorted(positions)
    assert '<a href="tables/mean-residual.csv" download>' in html


def test_report_has_the_claims_table_with_measured_values_pass_and_fail(run):
    html = run.report_path.read_text()
    san = run.results.query("variant == 'san' and layer == 3")["value"].mean()
    assert '<table class="claims">' in html
    assert re.search(rf"san-collapses.*<td>{san:.4g}</td>.*PASS", html, re.DOTALL)
    assert re.search(r"skip-collapses.*FAIL", html, re.DOTALL)
    assert [c.passed for c in run.claims] == [True, False]


def test_report_shows_config_tables_notes_and_what_was_run(run):
    html = run.report_path.read_text()
    assert "depth: 3" in html and "mean residual" in html and "values are synthetic" in html
    assert "residual &lt;&amp;&gt;" not in html  # titles live inside the PNGs, not the HTML
    assert "Synthetic decay for report tests." in html
    assert "paper findings: 1 of 2 pass, 1 fail (failed: skip-collapses)" in html


def test_rebuilding_the_report_gives_identical_files_without_running_units(run):
    files = [
        "report.html",
        "claims.json",
        "figures/residual-vs-layer.png",
        "figures/residual-vs-layer.svg",
        "tables/mean-residual.csv",
    ]
    before = {f: (run.out_dir / f).read_bytes() for f in files}
    (run.out_dir / "report.html").unlink()
    rebuilt = build_report(run.out_dir, experiment=dataclasses.replace(SYNTH, run_unit=never))
    assert {f: (run.out_dir / f).read_bytes() for f in files} == before
    pd.testing.assert_frame_equal(rebuilt.results, run.results, check_exact=True)


def test_figures_drawn_by_several_processes_are_the_bytes_drawn_by_one(run):
    files = ["report.html", *(f"figures/{p.name}" for p in (run.out_dir / "figures").iterdir())]
    built = {}
    for processes in (1, 2):  # two: this process draws one figure, a forked child the other
        build_report(run.out_dir, experiment=SYNTH, processes=processes)
        built[processes] = {f: (run.out_dir / f).read_bytes() for f in files}
    assert built[2] == built[1] and len(files) == 5


def test_report_command_rebuilds_an_identical_report(run, monkeypatch, capsys):
    monkeypatch.setitem(_registry._REGISTRY, "synth", SYNTH)
    before = run.report_path.read_bytes()
    run.report_path.write_text("stale")
    assert cli.main(["report", str(run.out_dir)]) == 0
    assert run.report_path.read_bytes() == before
    assert "paper findings: 1 of 2 pass, 1 fail" in capsys.readouterr().out


def test_report_of_a_folder_without_a_run_says_what_is_missing(tmp_path):
    with pytest.raises(InputError, match=r"has no config.yaml, manifest.json, results.csv; pass"):
        build_report(tmp_path)


def test_a_folder_that_is_no_run_is_named_so_before_any_link_below_it(tmp_path):
    """`report ~`: the missing run files are the error, not a link met deep in the tree (the
    tree is not walked); a run's own files as links are still refused (tests/report/test_links)."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "venv-lib").symlink_to(tmp_path / "a")
    (tmp_path / "results.csv").symlink_to(tmp_path / "elsewhere.csv")  # there, if dangling
    with pytest.raises(InputError, match=r"has no config.yaml, manifest.json; pass") as caught:
        build_report(tmp_path)
    assert "symbolic link" not in str(caught.value)


def test_long_tables_are_collapsed_and_leftover_index_columns_dropped():
    table = pd.DataFrame({"value": range(40)}).reset_index()  # a leftover "index" column
    pivot = pd.DataFrame({"a": [1.0]}, index=pd.Index(["san"], name="variant"))
    pivot.columns.name = "metric"
    assert list(tidy_table(table).columns) == ["value"]
    assert list(tidy_table(pivot).columns) == ["variant", "a"]
    page = render_html(
        experiment=SYNTH, config_text="", manifest={}, summary=Summary(tables={"long": table}),
        pngs={}, csvs={"long": "tables/long.csv"},
    )  # fmt: skip
    assert '<details id="table-long"><summary><b>long</b> (40 rows x 1 columns)' in page
    assert ">index<" not in page


def f(id_: str, values: list[float], **options) -> Claim:
    """A finding of the one rule on `values` against < 1."""
    return finding(id_, says=Quote("x", "Sec. 1"), text=id_, quantity="q", values=values,
                   side="<", margin=1.0, **options)  # fmt: skip


def test_findings_and_checks_are_reported_apart_and_counted_apart():
    claims = [
        f("f1", [0.1, 0.2]),
        check("c1", "an identity", "q", 2.0, "<", 1.0, note="check"),
    ]
    page = render_html(experiment=SYNTH, config_text="", manifest={},
                       summary=Summary(claims=claims), pngs={})  # fmt: skip
    text = re.sub(r"<[^>]+>", "", page)
    assert "paper findings: 1 of 1 pass; checks: 0 of 1 hold, 1 fail (failed: c1)" in text
    assert page.index('id="findings"') < page.index('id="checks"') < page.index("an identity")


def test_index_lists_every_run_with_findings_passed_and_a_relative_link(run, monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "synth", SYNTH)
    root = run.out_dir.parent
    assert cli.main(["report", "--index", str(root)]) == 0
    page = (root / "index.html").read_text()
    assert "<td>synth</td><td>quick</td><td>-</td>" in page
    assert (
        '<td class="fail">paper findings: 1 of 2 pass, 1 fail (failed: skip-collapses)</td>' in page
    )
    assert f'<a href="{run.out_dir.name}/report.html">' in page


def test_index_of_a_folder_without_runs_says_how_to_make_one(tmp_path):
    with pytest.raises(InputError, match="holds no finished run.*rankcollapse run"):
        write_index(tmp_path)


def test_not_tested_and_beyond_the_papers_are_shown_and_counted_apart():
    claims = [
        f("f1", [0.5, 0.51]),
        f("f2", [0.5, 0.4], assumptions=[Assumption("the arm learned", False, "at its baseline")]),
        f("b1", [2.0, 2.01], beyond=True),
    ]
    page = render_html(experiment=SYNTH, config_text="", manifest={},
                       summary=Summary(claims=claims), pngs={})  # fmt: skip
    assert (
        "paper findings: 1 of 2 pass, 1 not tested; beyond the papers: 0 of 1 pass, 1 fail" in page
    )
    assert (
        '<td class="not-tested">NOT TESTED</td><td class="why">assumptions not met: the arm' in page
    )
    assert "table.claims td.why { min-width: 14em; }" in page  # a note was about 80 px wide
    assert page.index('id="findings"') < page.index('id="beyond"')
    assert "(failed: b1; not tested: f2)" in page
    assert '<span class="verdict-fail">' in page  # a beyond FAIL colours the run red


def test_index_counts_not_tested_findings_apart(tmp_path):
    import json

    from rankcollapse.report.index import render_index, run_rows

    folder = tmp_path / "synth" / "abc"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("")
    (folder / "manifest.json").write_text('{"experiment": "synth", "preset": "quick"}')
    record = {"text": "a statement", "expected": "< 1", "measured": 0.5}
    claims = [
        {**record, "id": "a", "kind": "finding", "passed": True, "verdict": "PASS"},
        {**record, "id": "b", "kind": "finding", "passed": False, "verdict": "NOT TESTED",
         "untested": "not learned"},
        {**record, "id": "c", "kind": "finding", "passed": False},  # before verdicts: a FAIL
        {**record, "id": "d", "kind": "check", "passed": True},
    ]  # fmt: skip
    (folder / "claims.json").write_text(json.dumps(claims))
    rows = run_rows(tmp_path)
    line = "paper findings: 1 of 3 pass, 1 fail, 1 not tested; checks: 1 of 1 hold"
    assert rows[0]["verdicts"] == f"{line} (failed: c; not tested: b)"
    assert f'<td class="fail">{line} (failed: c; not tested: b)</td>' in render_index(rows, "runs")


def test_a_run_whose_only_fail_is_beyond_the_papers_is_red_in_the_index(tmp_path):
    import json

    from rankcollapse.report.index import render_index, run_rows

    folder = tmp_path / "synth" / "abc"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("")
    (folder / "manifest.json").write_text('{"experiment": "synth", "preset": "quick"}')
    record = {"text": "a statement", "expected": "< 1", "measured": 0.5}
    claims = [
        {**record, "id": "a", "kind": "finding", "passed": True, "verdict": "PASS"},
        {**record, "id": "z", "kind": "beyond", "passed": False, "verdict": "FAIL"},
    ]
    (folder / "claims.json").write_text(json.dumps(claims))
    rows = run_rows(tmp_path)
    assert rows[0]["worst"] == "FAIL"
    assert '<td class="fail">paper findings: 1 of 1 pass; beyond' in render_index(rows, "runs")


def test_what_was_run_lists_the_arms_in_the_results_not_every_preset_s():
    """The quick preset ran `san` only: "What was run" names san, never skip (the paper
    preset's), before the module's description of every preset."""
    results = pd.DataFrame({"variant": ["san"] * 2, "layer": [0, 1], "metric": "res",
                            "value": [1.0, 0.1]})  # fmt: skip
    page = render_html(experiment=SYNTH, config_text="", manifest={"preset": "quick"},
                       summary=Summary(), pngs={}, results=results)  # fmt: skip
    ran = page[page.index('id="what-ran"') : page.index('id="config"')]
    assert (
        "This run (preset quick) measured, as its results hold:</p>\n<ul>\n<li>variant: san</li>"
        in ran
    )
    assert "skip" not in ran.split("</ul>")[0]
    assert ran.index("This run") < ran.index("The experiment, for every preset")
