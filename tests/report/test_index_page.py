"""The index page tells runs apart and a FAIL from a NOT TESTED: overrides shown, verdict
counts in words with the cell coloured by the worst one, and every kind of output listed."""

from __future__ import annotations

import json

from rankcollapse.files import claim_output
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
    assert '<td class="not-tested">1 of 3 pass, 2 not tested</td>' in page
    assert '<td class="fail">0 of 3 pass, 1 fail, 2 not tested</td>' in page
    assert '<td class="pass">2 of 2 pass</td>' in page
    assert "3 runs; every finding passed in 1 of them, a finding failed in 1." in page


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
