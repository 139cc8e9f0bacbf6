"""The reproduction table: every paper finding beside our measurement, from stored runs.

One row per finding of every registered experiment, read from the `claims.json` of the newest
complete run of that experiment under a results folder: the paper's statement or number and
where it appears (section, theorem, figure), our measured value, the preset it came from, and
PASS, FAIL, NOT TESTED (with its reason) or "not run". The project's own conjectures (kind
"beyond") are listed apart from the papers' findings; checks (identities that hold by design)
are counted per experiment, never listed as findings. Nothing is recomputed; a `claims.json`
written before verdicts existed reads as PASS or FAIL.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any


from rankcollapse.lazy import lazy_module
from rankcollapse.errors import InputError
from rankcollapse.experiments import VERDICTS, experiment_names
from rankcollapse.files import check_replaceable, write_atomic
from rankcollapse.reading import LinkInsideError, refuse_links, shown
from rankcollapse.report.build import stored_tally, stored_verdict
from rankcollapse.report.html import STYLE, format_value
from rankcollapse.report.stored import (
    DamagedFileError,
    overrides_text,
    read_claims,
    read_manifest,
)

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

Notify = Callable[[str], None]  # a line for the user: a damaged run folder skipped, and why

PRESET_ORDER = ("paper", "cpu", "quick")  # with no preset asked for: the largest stored run
COLUMNS = [
    "experiment",
    "kind",
    "finding",
    "source",
    "paper",
    "measured",
    "expected",
    "preset",
    "result",
    "why",
    "seconds",
    "unit_seconds",
    "checks",
    "verdicts",
]


@dataclass(frozen=True)
class StoredRun:
    """A complete run folder and what its manifest says."""

    path: Path
    experiment: str
    preset: str
    finished: str
    seconds: float  # wall time, started to finished
    unit_seconds: float = float("nan")  # the units' own times, summed (reused ones too)
    overrides: str = "-"  # its `--set` overrides as typed (`overrides_text`)

    @property
    def setting(self) -> str:
        """The preset and what the run set over it: 'cpu', 'quick --set seeds=[0, 1, 2]'."""
        return self.preset if self.overrides == "-" else f"{self.preset} --set {self.overrides}"

    @property
    def claims(self) -> list[dict[str, Any]]:
        return read_claims(self.path)


def stored_runs(results_root: str | Path, notify: Notify | None = None) -> list[StoredRun]:
    """Every complete run (manifest status complete, claims.json present) under the root; a
    damaged one is skipped, and `notify` told which and why."""
    root = Path(results_root)
    if not root.is_dir():
        raise InputError(
            f"results folder {str(root)!r} does not exist; pass the folder `rankcollapse run` "
            "wrote to (default: results/)."
        )
    runs = []
    for manifest_path in sorted(root.glob("*/*/manifest.json")):
        folder = manifest_path.parent
        try:
            if folder.is_symlink() or folder.parent.is_symlink():  # never followed
                raise LinkInsideError(f"{shown(folder)} is reached through a symbolic link")
            refuse_links(folder, "run folder")
            manifest = read_manifest(folder)
            if manifest.get("status") != "complete" or not (folder / "claims.json").exists():
                continue
            read_claims(folder)
            seconds = _seconds(manifest.get("started"), manifest.get("finished"))
            unit_seconds = manifest.get("unit_seconds")
        except (DamagedFileError, LinkInsideError) as err:
            if notify:
                notify(f"skipped {shown(folder)}: {err}")
            continue
        runs.append(
            StoredRun(
                folder,
                manifest["experiment"],
                manifest.get("preset", "?"),
                manifest.get("finished") or "",
                seconds,
                float(unit_seconds) if isinstance(unit_seconds, int | float) else float("nan"),
                overrides_text(manifest.get("overrides") or {}),
            )
        )
    return runs


def _seconds(started: str | None, finished: str | None) -> float:
    """Wall time of a run from its manifest (whole seconds: the manifest's resolution)."""
    if not started or not finished:
        return float("nan")
    try:
        delta = dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)
    except (TypeError, ValueError):
        return float("nan")  # a time the manifest does not hold in ISO form: not known
    return delta.total_seconds()


def choose_run(runs: list[StoredRun], name: str, preset: str | None) -> StoredRun | None:
    """The newest run of `name` with `preset` (None: paper if one exists, else cpu, else quick)."""
    for wanted in (preset,) if preset else PRESET_ORDER:
        matching = [r for r in runs if r.experiment == name and r.preset == wanted]
        if matching:
            return max(matching, key=lambda r: r.finished)
    return None


def reproduction_table(
    results_root: str | Path, preset: str | None = None, notify: Notify | None = None
) -> pd.DataFrame:
    """One row per finding of every registered experiment (see the module docstring)."""
    runs = stored_runs(results_root, notify)
    rows: list[dict[str, object]] = []
    for name in experiment_names():
        run = choose_run(runs, name, preset)
        if run is None:
            rows.append({"experiment": name, "finding": "", "result": "not run"})
            continue
        claims = run.claims
        checks = [c for c in claims if c.get("kind") == "check"]
        checks_text = f"{sum(c['passed'] for c in checks)}/{len(checks)}"
        run_line = stored_tally(claims).text()
        if len(checks) == len(claims):  # an experiment of checks only still shows its run
            rows.append(
                {
                    "experiment": name,
                    "finding": "",
                    "preset": run.setting,
                    "result": "checks only",
                    "seconds": run.seconds,
                    "unit_seconds": run.unit_seconds,
                    "checks": checks_text,
                    "verdicts": run_line,
                }
            )
        for claim in (c for c in claims if c.get("kind", "finding") != "check"):
            verdict = stored_verdict(claim)
            rows.append(
                {
                    "experiment": name,
                    "kind": claim.get("kind", "finding"),
                    "finding": claim["id"],
                    "source": claim.get("source", ""),
                    "paper": claim.get("paper", "") or claim["text"],
                    "measured": _measured(claim),
                    "expected": claim["expected"],
                    "preset": run.setting,
                    "result": verdict,
                    "why": claim.get("untested")
                    or (claim.get("note", "") if verdict == "FAIL" else ""),
                    "seconds": run.seconds,
                    "unit_seconds": run.unit_seconds,
                    "checks": checks_text,
                    "verdicts": run_line,
                }
            )
    table = pd.DataFrame(rows, columns=COLUMNS)
    text = [c for c in COLUMNS if c not in ("seconds", "unit_seconds")]
    table[text] = table[text].astype(object).fillna("")  # an empty table's columns are float
    return table


def _measured(claim: dict[str, Any]) -> str:
    """The measured value, with its interval and units where the one rule decided it.

    Example:
        >>> _measured({"measured": -0.31, "low": -0.4, "high": -0.22, "n_units": 8})
        '-0.31 [-0.4, -0.22] over 8 units'
    """
    value = format_value(claim["measured"])
    if claim.get("low") is None or claim.get("high") is None:
        return value
    low, high = format_value(claim["low"]), format_value(claim["high"])
    return f"{value} [{low}, {high}] over {claim.get('n_units')} units"


def verdict_counts(table: pd.DataFrame, kind: str = "finding") -> dict[str, int]:
    """PASS, FAIL and NOT TESTED counted apart, over the rows of one kind."""
    results = table.loc[table["kind"] == kind, "result"].value_counts()
    return {verdict: int(results.get(verdict, 0)) for verdict in VERDICTS}


def _counts(table: pd.DataFrame) -> str:
    paper, beyond = verdict_counts(table), verdict_counts(table, "beyond")
    not_run = int((table["result"] == "not run").sum())
    return (
        f"Paper findings: {paper['PASS']} pass, {paper['FAIL']} fail, "
        f"{paper['NOT TESTED']} not tested. Beyond the papers: {beyond['PASS']} pass, "
        f"{beyond['FAIL']} fail, {beyond['NOT TESTED']} not tested. "
        f"{not_run} of {len(experiment_names())} experiments not run."
    )


def _markdown_rows(table: pd.DataFrame) -> list[str]:
    header = ["experiment", "finding", "paper says (where)", "we measure", "preset", "result"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in table.itertuples():
        where = f" ({row.source})" if row.source else ""
        measured = f"{row.measured} (expected {row.expected})" if row.expected else ""
        result = f"{row.result}: {row.why}" if row.why else row.result
        cells = [row.experiment, row.finding, f"{row.paper}{where}", measured, row.preset, result]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return lines


def reproduction_markdown(table: pd.DataFrame) -> str:
    """The table as Markdown, with a one-line count above it; the project's own conjectures
    ("beyond the papers") in a second table."""
    paper = table[table["kind"] != "beyond"]
    beyond = table[table["kind"] == "beyond"]
    lines = [
        "# Reproduction table",
        "",
        "Every finding of every experiment: the paper's sentence and where it stands, our",
        "measurement on the stored run (the mean over its units, with the 95 % interval the one",
        "decision rule reads: docs/methods.md, sec. 7), its preset and its verdict: PASS, FAIL",
        "(with what the paper says and what we measure) or NOT TESTED (with its cause: an",
        "interval that straddles the margin, with the units and the preset that would decide it,",
        "or a run outside the theorem's assumptions). Built by `rankcollapse reproduce` from the",
        "runs' `claims.json`; checks (identities that hold by design) are counted in the runs'",
        "lines below, not listed.",
        "",
        _counts(table),
        "",
        *_markdown_rows(paper),
    ]
    if not beyond.empty:
        lines += [
            "",
            "## Beyond the papers",
            "",
            "The project's own conjectures and extensions, tested like findings; no paper states",
            "them.",
            "",
            *_markdown_rows(beyond),
        ]
    lines += [
        "",
        "## The runs",
        "",
        "A run that reused stored units takes little wall time: its units' own times, summed,",
        "say what computing it costs.",
        "",
        (
            "| experiment | preset | unit seconds (summed) | wall seconds "
            "| verdicts (as the run printed them) |"
        ),
        "|---|---|---|---|---|",
    ]
    for name, rows in table[table["result"] != "not run"].groupby("experiment", sort=False):
        first = rows.iloc[0]
        lines.append(
            f"| {name} | {first['preset']} | {_secs(first['unit_seconds'])} | "
            f"{_secs(first['seconds'])} | {first['verdicts']} |"
        )
    return "\n".join(lines) + "\n"


def _secs(value: float) -> str:
    """Seconds to 3 significant digits, '-' when not known (a manifest of an older version)."""
    return "-" if pd.isna(value) else f"{value:.3g}"


VERDICT_CLASS = {"PASS": "pass", "FAIL": "fail", "NOT TESTED": "untested", "not run": "notrun"}
VERDICT_STYLE = (
    "td.untested { background: #fff3cd; color: #6b4e00; } td.notrun { color: #777; } "
    "td.pass, td.fail, td.untested, td.notrun { white-space: nowrap; }"
)
# The page is as wide as the window (up to 110em) and the prose columns keep a reading width,
# the table scrolling sideways in a narrow window: "why" was squeezed to about 90 px.
WIDE_STYLE = (
    "body { max-width: 110em; } td.col-why { min-width: 18em; } td.col-paper { min-width: 16em; }"
)


def reproduction_html(table: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """The table as one self-contained HTML page in the reports' style: verdicts coloured,
    each experiment linked to its report (`links`: experiment -> relative path)."""
    links = links or {}
    shown = [
        c
        for c in table.columns
        if c not in ("seconds", "unit_seconds", "checks", "kind", "verdicts")
    ]
    head = "".join(f"<th>{escape(c)}</th>" for c in shown)
    body = []
    for row in table.to_dict("records"):
        cells = []
        for column in shown:
            text = escape(str(row[column]))
            if column == "experiment" and row[column] in links:
                text = f'<a href="{escape(links[row[column]])}">{text}</a>'
            css = VERDICT_CLASS.get(str(row[column]), "") if column == "result" else ""
            css = css or (f"col-{column}" if f"td.col-{column}" in WIDE_STYLE else "")
            cells.append(f'<td class="{css}">{text}</td>' if css else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            "<title>rankcollapse: reproduction</title>",
            f"<style>{STYLE}{VERDICT_STYLE}{WIDE_STYLE}</style></head><body>",
            "<h1>Reproduction table</h1>",
            f'<p class="summary">{escape(_counts(table))}</p>',
            f'<div class="scroll"><table><tr>{head}</tr>',
            *body,
            "</table></div></body></html>",
            "",
        ]
    )


def report_links(
    results_root: str | Path, out_dir: str | Path, preset: str | None = None
) -> dict[str, str]:
    """experiment -> the report of the run the table reads, relative to `out_dir`."""
    runs = stored_runs(results_root)
    links = {}
    for name in experiment_names():
        run = choose_run(runs, name, preset)
        if run is not None and (run.path / "report.html").is_file():
            report = (run.path / "report.html").resolve()
            links[name] = Path(os.path.relpath(report, Path(out_dir).resolve())).as_posix()
    return links


# A line every reproduction file begins with: a file without it is not ours to replace.
SIGNATURES = {".md": "# Reproduction table", ".html": "<title>rankcollapse: reproduction</title>"}


def checked_table(
    results_root: str | Path, preset: str | None = None, notify: Notify | None = None
) -> pd.DataFrame:
    """`reproduction_table`, refused (InputError) when no complete run is stored (of `preset`,
    when one is asked for): a table of nothing but "not run" rows replaces nothing."""
    table = reproduction_table(results_root, preset, notify)
    if not (table["result"] == "not run").all():
        return table
    if preset is None:
        raise InputError(
            f"no complete run of any experiment is stored in {str(results_root)!r}/EXPERIMENT/"
            "PRESET, where `rankcollapse run` writes one; pass the results folder it wrote to "
            "(default: results/), or run an experiment first (`rankcollapse run "
            "toy-collapse`). Nothing was written."
        )
    stored = sorted({run.preset for run in stored_runs(results_root)})
    raise InputError(
        f"no complete run of preset {preset!r} is stored under {str(results_root)!r} "
        f"(stored presets: {', '.join(stored) or 'none'}); run them first "
        f"(`rankcollapse run all --preset {preset}`) or pass another --preset. Nothing "
        "was written."
    )


def write_reproduction(
    results_root: str | Path,
    out_dir: str | Path,
    preset: str | None = None,
    notify: Notify | None = None,
    stem: str = "reproduction",
    table: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, Path, Path]:
    """Write `stem`.md and `stem`.html of `table` (default: `checked_table`) into `out_dir`;
    refused (OutputError, nothing written) when either file exists and was not written here
    (`files.check_replaceable`)."""
    if table is None:
        table = checked_table(results_root, preset, notify)
    out = Path(out_dir)
    markdown, html = out / f"{stem}.md", out / f"{stem}.html"
    for path in (markdown, html):
        check_replaceable(path, SIGNATURES[path.suffix])
    write_atomic(markdown, reproduction_markdown(table).encode())
    links = report_links(results_root, out, preset)
    write_atomic(html, reproduction_html(table, links).encode())
    return table, markdown, html
