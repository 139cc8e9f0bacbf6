"""An index page of every stored run under a results folder: experiment, preset and `--set`
overrides, date, findings (how many pass, fail and are not tested; a FAIL red, NOT TESTED
grey), and a relative link to each report (so the folder can be moved or zipped); then the
folders of the other commands. The results folder is walked without following a symbolic link:
a run folder that holds one is skipped with a line saying so, a link to a folder is named and
left. A name that is not UTF-8 is shown escaped (`reading.shown`) and linked percent-encoded.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_to_bytes

from rankcollapse.errors import InputError
from rankcollapse.files import check_replaceable, read_marker, write_atomic
from rankcollapse.reading import LinkInsideError, refuse_links, shown
from rankcollapse.report.build import stored_tally
from rankcollapse.report.html import STYLE
from rankcollapse.report.stored import (
    DamagedFileError,
    folder_kind,
    overrides_text,
    read_claims,
    read_manifest,
)

SIGNATURE = "<title>rankcollapse runs in "  # in the head of every index page written here
Notify = Callable[[str], None]  # a line for the user: a damaged run folder skipped, and why


def folders(root: Path, notify: Notify | None = None) -> list[Path]:
    """`root` and every folder below it, in name order, found without following a symbolic
    link; `notify` hears of each link to a folder outside a run folder (left, never entered)."""
    found, links = [], []
    for parent, dirs, _ in os.walk(root, followlinks=False):
        found.append(Path(parent))
        links += [Path(parent) / d for d in dirs if os.path.islink(os.path.join(parent, d))]
    runs = {f for f in found if os.path.lexists(f / "manifest.json")}
    for link in sorted(links):
        if notify and not any(run in link.parents for run in runs):
            notify(f"skipped {shown(link)}: a symbolic link; links are never followed.")
    return sorted(found)


def link_to(path: Path, root: Path) -> str:
    r"""The relative URL of `path` under `root`, percent-encoded (a name that is not UTF-8
    keeps its bytes).

    Example:
        >>> link_to(Path("r") / os.fsdecode(b"run-\xff") / "report.html", Path("r"))
        'run-%FF/report.html'
    """
    return quote(os.fsencode(path.relative_to(root).as_posix()))


def run_rows(root: Path, notify: Notify | None = None) -> list[dict[str, Any]]:
    """One row per run folder under `root` (one with manifest.json and report.html); a
    damaged one, or one holding a symbolic link, is skipped, and `notify` told which and why."""
    rows = []
    for folder in folders(root, notify):
        if not os.path.lexists(folder / "manifest.json") or not (folder / "report.html").is_file():
            continue
        try:
            refuse_links(folder, "run folder")
            manifest = read_manifest(folder)
            claims = read_claims(folder) if (folder / "claims.json").exists() else []
        except (DamagedFileError, LinkInsideError) as err:
            if notify:
                notify(f"skipped {shown(folder)}: {err}")
            continue
        counts = stored_tally(claims)
        rows.append(
            {
                "experiment": manifest.get("experiment", folder.name),
                "preset": manifest.get("preset"),
                "overrides": manifest.get("overrides") or {},
                "finished": manifest.get("finished") or manifest.get("started"),
                "verdicts": counts.text(),
                "worst": counts.worst,
                "link": link_to(folder / "report.html", root),
            }
        )
    return rows


# The file each kind of output folder is seen by, a name pattern (its other files sit beside
# it): the first match in name order, or, for a pattern with a '*' (one file per metric), every
# match, a row each.
MAIN_FILE = {
    "simulate": "collapse.png",
    "measure": "collapse.png",
    "probe": "collapse.png",
    "compare": "compare.png",
    "qk-rank": "qk_ranks.csv",
    "paths-count": "paths.png",
    "paths-decompose": "components.png",
    "paths-products": "products.png",
    "plot-training": "training-heatmap*.png",
}


def output_rows(root: Path) -> list[dict[str, Any]]:
    """One row per output folder of simulate, measure, probe, qk-rank, compare and paths under
    `root`, and per metric of a plot-training folder (known by its marker, or by its parent's
    name for an older one); `label` says what it holds (`_what`)."""
    rows = []
    for folder in folders(root):
        kind = folder_kind(folder)
        if kind is None and folder.parent.name in MAIN_FILE:  # written before markers
            kind = folder.parent.name
        if kind not in MAIN_FILE:
            continue
        mains = [
            p for p in sorted(folder.glob(MAIN_FILE[kind])) if p.is_file() and not p.is_symlink()
        ]
        label = str((read_marker(folder) or {}).get("label") or "")
        for main in mains if "*" in MAIN_FILE[kind] else mains[:1]:
            finished = dt.datetime.fromtimestamp(main.stat().st_mtime, dt.UTC)
            rows.append(
                {
                    "kind": kind,
                    "label": shown(_what(kind, label, main)),
                    "link": link_to(main, root),
                    "finished": finished.isoformat(timespec="seconds"),
                }
            )
    return rows


def _what(kind: str, label: str, main: Path) -> str:
    """What an output holds, in words: its marker's label and, for plot-training, the metric
    its file is named by (the log(s) it draws and which metric).

    Example:
        >>> _what("plot-training", "runs/san.csv", Path("training-heatmap-mu_rel.png"))
        'log runs/san.csv, metric mu_rel'
        >>> _what("probe", "minilm (pretrained)", Path("collapse.png"))
        'minilm (pretrained)'
    """
    if kind != "plot-training":
        return label
    metric = main.stem.removeprefix("training-heatmap").lstrip("-")
    logs = f"log{'s' if ', ' in label else ''} {label}" if label else ""
    return ", ".join(part for part in (logs, f"metric {metric}" if metric else "") if part)


def render_index(
    rows: list[dict[str, Any]], title: str, outputs: list[dict[str, Any]] | None = None
) -> str:
    """The index page: a table of runs by experiment, oldest first within each, then the
    folders of the other commands (simulate, probe, compare, ...) by kind."""
    rows = sorted(rows, key=lambda r: (r["experiment"], str(r["finished"])))
    n_all = sum(r["worst"] == "PASS" for r in rows)
    n_failed = sum(r["worst"] == "FAIL" for r in rows)
    header = ("experiment", "preset", "--set", "finished (UTC)", "findings", "report")
    body = ["<tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    for r in rows:
        body.append(
            f"<tr><td>{escape(str(r['experiment']))}</td><td>{escape(str(r['preset']))}</td>"
            f"<td>{escape(overrides_text(r.get('overrides') or {}))}</td>"
            f"<td>{escape(str(r['finished']))}</td>{_findings_cell(r)}"
            f'<td><a href="{escape(r["link"])}">{escape(_shown_link(r["link"]))}</a></td></tr>'
        )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
            f"<h1>{escape(title)}</h1>",
            f'<p class="summary">{_summary(len(rows), n_all, n_failed)}</p>',
            '<table class="runs">',
            *body,
            "</table>",
            *_outputs_table(outputs or []),
            "</body></html>",
            "",
        ]
    )


def _outputs_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "<h2>Other outputs</h2>",
        '<table class="outputs">',
        "<tr><th>command</th><th>what</th><th>written (UTC)</th><th>file</th></tr>",
    ]
    for r in sorted(rows, key=lambda r: (r["kind"], r["finished"])):
        lines.append(
            f"<tr><td>{escape(r['kind'])}</td><td>{escape(r['label'])}</td>"
            f"<td>{escape(r['finished'])}</td>"
            f'<td><a href="{escape(r["link"])}">{escape(_shown_link(r["link"]))}</a></td></tr>'
        )
    return [*lines, "</table>"]


def _shown_link(link: str) -> str:
    r"""A percent-encoded link as a reader sees the path: UTF-8 names as they are, other bytes
    escaped (`reading.shown`).

    Example:
        >>> print(_shown_link("run-%FF/a%20b.html"))
        run-\xff/a b.html
    """
    return shown(os.fsdecode(unquote_to_bytes(link)))


def _summary(n_runs: int, n_all: int, n_failed: int) -> str:
    return f"{n_runs} runs; every claim passed in {n_all} of them, a claim failed in {n_failed}."


def _findings_cell(row: dict[str, Any]) -> str:
    """The run's `Tally` line, red with a FAIL (a check's too), grey with a NOT TESTED and no
    FAIL, green when every claim passed.

    Example:
        >>> _findings_cell({"verdicts": "paper findings: 0 of 1 pass, 1 fail", "worst": "FAIL"})
        '<td class="fail">paper findings: 0 of 1 pass, 1 fail</td>'
    """
    verdict = {"PASS": "pass", "FAIL": "fail", "NOT TESTED": "not-tested"}[row["worst"]]
    return f'<td class="{verdict}">{escape(row["verdicts"])}</td>'


def write_index(root: str | Path, notify: Notify | None = None) -> Path:
    """Write `root/index.html`, the index page of the runs and other outputs stored under
    `root` (e.g. results/); `notify` hears of each damaged run folder skipped. An index.html
    there that this function did not write (no `SIGNATURE`) is refused, never replaced."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(
            f"{shown(root)!r} is not a folder; pass the results folder, e.g. results/."
        )
    rows, outputs = run_rows(root, notify), output_rows(root)
    if not rows and not outputs:
        raise InputError(
            f"{shown(root)!r} holds no finished run (no report.html beside a manifest.json) and "
            "no output of simulate, probe or compare; run an experiment first, e.g. "
            "`rankcollapse run toy-collapse`."
        )
    path = root / "index.html"
    if path.is_dir() and not path.is_symlink():
        raise InputError(f"{shown(path)!r} is a folder; remove it, or pass another results folder.")
    check_replaceable(path, SIGNATURE)  # a user's own index.html is never replaced
    title = f"{SIGNATURE.removeprefix('<title>')}{shown(root.name or root)}"
    write_atomic(path, render_index(rows, title, outputs).encode())
    return path
