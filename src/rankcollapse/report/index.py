"""An index page of every stored run under a results folder: experiment, preset, date,
findings passed, and a relative link to each report (so the folder can be moved or zipped).
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from rankcollapse.errors import InputError
from rankcollapse.experiments import count_verdicts
from rankcollapse.files import write_atomic
from rankcollapse.report.build import stored_verdict
from rankcollapse.report.html import STYLE


def run_rows(root: Path) -> list[dict[str, Any]]:
    """One row per run folder under `root` (one with manifest.json and report.html)."""
    rows = []
    for manifest_path in sorted(root.rglob("manifest.json")):
        folder = manifest_path.parent
        if not (folder / "report.html").is_file():
            continue
        manifest = json.loads(manifest_path.read_text())
        claims_path = folder / "claims.json"
        claims = json.loads(claims_path.read_text()) if claims_path.is_file() else []
        findings = [c for c in claims if c.get("kind", "finding") == "finding"]
        counts = count_verdicts([stored_verdict(c) for c in findings])
        rows.append(
            {
                "experiment": manifest.get("experiment", folder.name),
                "preset": manifest.get("preset"),
                "finished": manifest.get("finished") or manifest.get("started"),
                "n_findings": len(findings),
                "n_passed": counts["PASS"],
                "n_untested": counts["NOT TESTED"],
                "link": (folder / "report.html").relative_to(root).as_posix(),
            }
        )
    return rows


def render_index(rows: list[dict[str, Any]], title: str) -> str:
    """The index page: a table of runs by experiment, oldest first within each."""
    rows = sorted(rows, key=lambda r: (r["experiment"], str(r["finished"])))
    n_all = sum(r["n_passed"] == r["n_findings"] for r in rows)
    header = ("experiment", "preset", "finished (UTC)", "findings passed", "report")
    body = ["<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    for r in rows:
        verdict = "pass" if r["n_passed"] == r["n_findings"] else "fail"
        body.append(
            f"<tr><td>{escape(str(r['experiment']))}</td><td>{escape(str(r['preset']))}</td>"
            f"<td>{escape(str(r['finished']))}</td>"
            f'<td class="{verdict}">{r["n_passed"]} of {r["n_findings"]}'
            f"{_untested(r)}</td>"
            f'<td><a href="{escape(r["link"])}">{escape(r["link"])}</a></td></tr>'
        )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f'<p class="summary">{len(rows)} runs; every finding passed in {n_all} of them.</p>',
            '<table class="runs">',
            *body,
            "</table></body></html>",
            "",
        ]
    )


def _untested(row: dict[str, Any]) -> str:
    return f" ({row['n_untested']} not tested)" if row.get("n_untested") else ""


def write_index(root: str | Path) -> Path:
    """Write `root/index.html`, the index page of the runs stored under `root` (e.g. results/)."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{str(root)!r} is not a folder; pass the results folder, e.g. results/.")
    rows = run_rows(root)
    if not rows:
        raise InputError(
            f"{str(root)!r} holds no finished run (no report.html beside a manifest.json); "
            "run an experiment first, e.g. `rankcollapse run toy-collapse`."
        )
    path = root / "index.html"
    write_atomic(path, render_index(rows, f"rankcollapse runs in {root.name or root}").encode())
    return path
