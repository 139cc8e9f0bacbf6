"""The index page tells runs apart and a FAIL from a NOT TESTED: overrides shown, verdict
counts in words with the cell coloured by the worst one, and every kind of output listed."""

from __future__ import annotations

import json

from rankcollapse.cli import main
from rankcollapse.files import claim_output
from rankcollapse.measure.monitor import CsvLog, watch
from rankcollapse.nets import NetConfig, ToyNet, random_tokens
from rankcollapse.report.index import render_index, run_rows, write_index


def _run(root, name: str, verdicts: list[str], overrides: dict | None = None) -> None:
    folder = root / "wu2024-masks" / name
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("")
    manifest = {"experiment": "wu2024-masks", "preset": "quick", "finished": name}
    (folder / "manifest.json").write_text(json.dumps({**manifest, "overrides": overrides or {}}))
    claims = [{"id": f"f{i}", "kind": "finding", "text": "t", "expected": "< 1", "measured": 0.5,
               "passed": v == "PASS", "verdict": v} for i, v in enumerate(verdicts)]  # fmt: skip
    (folder / "claims.json").write_text(json.dumps(claims))


def test_a_fail_is_red_and_named_and_not_tested_alone_is_grey(tmp_path):
    _run(tmp_path, "a", ["PASS", "NOT TESTED", "NOT TESTED"])
    _run(tmp_path, "b", ["FAIL", "NOT TESTED", "NOT TESTED"])
    _run(tmp_path, "c", ["PASS", "PASS"])
    page = render_index(run_rows(tmp_path), "runs")
    untested = "(not tested: f1, f2)"
    assert (
        f'<td class="not-tested">paper findings: 1 of 3 pass, 2 not tested {untested}</td>' in page
    )
    failed = "paper findings: 0 of 3 pass, 1 fail, 2 not tested (failed: f0; not tested: f1, f2)"
    assert f'<td class="fail">{failed}</td>' in page
    assert '<td class="pass">paper findings: 2 of 2 pass</td>' in page
    assert "3 runs; every claim passed in 1 of them, a claim failed in 1." in page


def test_runs_that_differ_by_their_overrides_show_them(tmp_path):
    _run(tmp_path, "a", ["PASS"], {"masks": ["causal"], "n_layers": 4})
    _run(tmp_path, "b", ["PASS"], {"masks": ["window:1"]})
    page = render_index(run_rows(tmp_path), "runs")
    assert "<td>masks=[&quot;causal&quot;] n_layers=4</td>" in page
    assert "<td>masks=[&quot;window:1&quot;]</td>" in page
    assert "<th>--set</th>" in page


def test_paths_and_plot_training_outputs_are_listed(tmp_path):
    for command, name in [("paths-count", "paths.png"), ("paths-decompose", "components.png"),
                          ("paths-products", "products.png"),
                          ("plot-training", "training-heatmap.png"), ("compare", "compare.png")]:  # fmt: skip
        folder = tmp_path / command
        claim_output(folder, command)
        (folder / name).write_bytes(b"png")
    page = write_index(tmp_path).read_text()
    for link in ("paths-count/paths.png", "paths-decompose/components.png",
                 "paths-products/products.png", "plot-training/training-heatmap.png",
                 "compare/compare.png"):  # fmt: skip
        assert f'href="{link}"' in page
    for command in ("paths-count", "paths-decompose", "paths-products", "plot-training"):
        assert f"<td>{command}</td>" in page


def test_a_plot_training_row_names_its_logs_and_metric(tmp_path):
    folder = tmp_path / "plot-training" / "san"
    claim_output(folder, "plot-training", "abc", label="runs/san.csv, runs/skip.csv")
    for metric in ("mu_rel", "res_comp_rel"):
        (folder / f"training-heatmap-{metric}.png").write_bytes(b"png")
    older = tmp_path / "plot-training" / "old"
    claim_output(older, "plot-training")
    (older / "training-heatmap.png").write_bytes(b"png")
    page = write_index(tmp_path).read_text()
    for metric in ("mu_rel", "res_comp_rel"):
        assert (
            f"<td>logs runs/san.csv, runs/skip.csv, metric {metric}</td>" in page
            and f'href="plot-training/san/training-heatmap-{metric}.png"' in page
        )
    assert page.count("<td>plot-training</td>") == 3  # a row per metric, and the older one


def test_plot_training_through_the_cli_is_listed_with_its_log_and_metric(tmp_path, monkeypatch):
    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    logs=[CsvLog(tmp_path / "san.csv")])  # fmt: skip
    for step in range(2):
        monitor.step(step)
    monkeypatch.chdir(tmp_path)
    assert main(["plot-training", "san.csv", "--metric", "mu_rel"]) == 0
    assert main(["report", "--index", "results"]) == 0
    page = (tmp_path / "results" / "index.html").read_text()
    assert "<td>log san.csv, metric mu_rel</td>" in page
