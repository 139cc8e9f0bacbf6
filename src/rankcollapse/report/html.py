"""One self-contained HTML page per run, read top to bottom: a summary (what ran, which
findings pass, fail or are not tested, the main figure), a table of contents, the figures, the findings and
checks, notes, the tables (collapsed, each downloadable as CSV), then what was run, the
config and the manifest.

Figures are embedded as base64 PNG and shown at their size in the paper (FIGURE_PX_PER_INCH),
so their fonts read as intended; the PNG has more pixels than it is drawn with. Links point
only to files in the run's own folder (the SVG copy of each figure, each table's CSV). The
only times on the page are those recorded in the manifest, so rebuilding is byte-identical.
"""

from __future__ import annotations

import base64
import inspect
import json
import math
import re
from html import escape
from typing import TYPE_CHECKING, Any


from rankcollapse.lazy import lazy_module
from rankcollapse.experiments import Claim, Experiment, Summary, tally

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

FIGURE_PX_PER_INCH = 120  # CSS px per inch of figure: a 7-in figure is drawn 840 px wide
TABLE_ROWS_OPEN = 12  # longer tables start collapsed
# Columns that name what a run compared (shown in the summary when the results have them).
ARM_COLUMNS = ("model", "init", "architecture", "variant", "arm", "mask", "task", "context")

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 62em; color: #222;
  line-height: 1.45; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; }
h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { background: #d9f2d9; color: #165c16; font-weight: bold; }
td.fail { background: #f8d7d7; color: #8a1111; font-weight: bold; }
td.not-tested { background: #eeeeee; color: #555; font-weight: bold; }
table.claims td.why { min-width: 14em; }
.summary { padding: .6em 1em; background: #eef3fa; border-radius: 4px; }
.summary p { margin: .3em 0; }
.verdict-pass { color: #165c16; font-weight: bold; } .verdict-fail { color: #8a1111; font-weight: bold; }
.verdict-untested { color: #555; font-weight: bold; }
nav ol { columns: 2; font-size: .9em; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #555; }
details { margin: .4em 0; } summary { cursor: pointer; }
.scroll { overflow-x: auto; }
"""


KEY_META = "rankcollapse-report-key"
PAGE_END = "</body></html>\n"  # the last characters of every report page


def render_html(
    *,
    experiment: Experiment,
    config_text: str,
    manifest: dict[str, Any],
    summary: Summary,
    pngs: dict[str, bytes],
    sizes: dict[str, tuple[float, float]] | None = None,
    svgs: dict[str, str] | None = None,
    csvs: dict[str, str] | None = None,
    results: pd.DataFrame | None = None,
    key: str = "",
) -> str:
    """The report page.

    Args:
        pngs: figure name -> PNG bytes, in the summary's order (the first is the main figure).
        sizes: figure name -> (width, height) in inches, to draw it at its size.
        svgs: figure name -> its vector copy in the run folder ("figures/x.svg"), linked.
        csvs: table name -> its CSV in the run folder ("tables/y.csv"), linked.
        results: the run's tidy results, to list the models and arms that actually ran.
        key: what the page was built from (`report.build.report_key`), in its head.
    """
    sizes, svgs, csvs = sizes or {}, svgs or {}, csvs or {}
    names = list(pngs)
    parts = _head(experiment, summary, manifest, results, key)
    if names:
        parts.append(_figure(names[0], pngs[names[0]], sizes.get(names[0]), svgs.get(names[0])))
    parts += _contents(summary, names)
    parts += _figures_section(names, pngs, sizes, svgs)
    parts += _claims_sections(summary)
    parts += _notes_and_tables(summary, csvs)
    parts += _run_sections(experiment, config_text, manifest, results)
    return "\n".join(parts) + "\n" + PAGE_END


def _head(
    experiment: Experiment,
    summary: Summary,
    manifest: dict[str, Any],
    results: pd.DataFrame | None,
    key: str,
) -> list[str]:
    """The page's head and its summary box: what ran, the verdicts, the arms."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="{KEY_META}" content="{escape(key)}">',
        f"<title>{escape(experiment.name)}: rankcollapse report</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(experiment.name)}</h1>",
        f"<p>{escape(experiment.description)}</p>",
        '<div class="summary">',
        f"<p>{_verdict_line(summary.claims)}</p>",
        f"<p>{escape(_ran_line(manifest))}</p>",
        *[f"<p>{line}</p>" for line in _arm_lines(results)],
        "</div>",
    ]


def _contents(summary: Summary, names: list[str]) -> list[str]:
    """The table of contents: one entry per section the page has."""
    sections = [("figures", "Figures")] if names else []
    sections += [("findings", "Findings")]
    sections += [("beyond", "Beyond the papers")] if summary.beyond else []
    sections += [("checks", "Checks")] if summary.checks else []
    sections += [("notes", "Notes")] if summary.notes else []
    sections += [("tables", "Tables")] if summary.tables else []
    sections += [("what-ran", "What was run"), ("config", "Config"), ("manifest", "Manifest")]
    return [
        "<nav><h2>Contents</h2><ol>",
        *[f'<li><a href="#{key}">{title}</a></li>' for key, title in sections],
        "</ol></nav>",
    ]


def _figures_section(
    names: list[str],
    pngs: dict[str, bytes],
    sizes: dict[str, tuple[float, float]],
    svgs: dict[str, str],
) -> list[str]:
    """Every figure but the main one (shown in the summary), which is linked."""
    if not names:
        return []
    parts = [
        '<h2 id="figures">Figures</h2>',
        (
            f'<p>The main figure, <a href="#figure-{_anchor(names[0])}">'
            f"{escape(names[0])}</a>, is shown above.</p>"
        ),
    ]
    parts += [_figure(name, pngs[name], sizes.get(name), svgs.get(name)) for name in names[1:]]
    return parts


def _claims_sections(summary: Summary) -> list[str]:
    """Findings, then the project's own conjectures, then the checks."""
    findings, beyond, checks = summary.findings, summary.beyond, summary.checks
    parts = ['<h2 id="findings">Findings</h2>']
    parts.append(
        _claims_table(findings) if findings else "<p>This experiment states no findings.</p>"
    )
    if beyond:
        parts += [
            '<h2 id="beyond">Beyond the papers</h2>',
            (
                "<p>The project's own conjectures and extensions, tested like findings but not "
                "statements of a paper.</p>"
            ),
            _claims_table(beyond),
        ]
    if checks:
        parts += [
            '<h2 id="checks">Checks</h2>',
            (
                "<p>Identities and constructions that hold by design: they guard the code and "
                "are not evidence for a paper.</p>"
            ),
            _claims_table(checks),
        ]
    return parts


def _notes_and_tables(summary: Summary, csvs: dict[str, str]) -> list[str]:
    """The summary's notes as a list and its tables, each collapsed when long."""
    parts: list[str] = []
    if summary.notes:
        parts += ['<h2 id="notes">Notes</h2>', "<ul>"]
        parts += [f"<li>{escape(note)}</li>" for note in summary.notes]
        parts += ["</ul>"]
    if summary.tables:
        parts.append('<h2 id="tables">Tables</h2>')
        for name, table in summary.tables.items():
            parts.append(_table_section(name, tidy_table(table), csvs.get(name)))
    return parts


def _run_sections(
    experiment: Experiment,
    config_text: str,
    manifest: dict[str, Any],
    results: pd.DataFrame | None,
) -> list[str]:
    """What was run: the arms in this run's results (never the config's or the paper's full
    list), then the experiment module's docstring, which describes every preset; the config
    and the manifest."""
    doc = inspect.getdoc(inspect.getmodule(experiment.run_unit)) or experiment.description
    arms = [f"<li>{escape(column)}: {escape(values)}</li>" for column, values in _arms(results)]
    preset = escape(str(manifest.get("preset", "")))
    ran = (
        [
            f"<p>This run (preset {preset}) measured, as its results hold:</p>",
            "<ul>",
            *arms,
            "</ul>",
        ]
        if arms
        else []
    )
    return [
        '<h2 id="what-ran">What was run</h2>',
        *ran,
        "<p>The experiment, for every preset (the paper preset runs every arm named here):</p>",
        _doc_html(doc),
        '<h2 id="config">Config</h2>',
        f"<details><summary>config.yaml</summary><pre>{escape(config_text)}</pre></details>",
        '<h2 id="manifest">Manifest</h2>',
        (
            "<details><summary>manifest.json (versions, seeds, host, timings)</summary>"
            f"<pre>{escape(json.dumps(manifest, indent=2, default=str))}</pre></details>"
        ),
    ]


def _verdict_line(claims: list[Claim]) -> str:
    """The summary box's verdicts: `Tally.text`, coloured by the run's worst verdict."""
    counts = tally(claims)
    style = {"PASS": "pass", "FAIL": "fail", "NOT TESTED": "untested"}[counts.worst]
    return f'<span class="verdict-{style}">{escape(counts.text())}</span>.'


def _ran_line(manifest: dict[str, Any]) -> str:
    packages = manifest.get("packages", {})
    cached = manifest.get("n_cached") or 0
    reused = f" ({cached} reused from an earlier run)" if cached else ""
    return (
        f"Preset {manifest.get('preset')}, config {str(manifest.get('config_hash'))[:10]}: "
        f"{manifest.get('n_units')} units{reused}, finished {manifest.get('finished')} on "
        f"{manifest.get('host')} (rankcollapse {packages.get('rankcollapse')}, "
        f"torch {packages.get('torch')})."
    )


def _arms(results: pd.DataFrame | None) -> list[tuple[str, str]]:
    """(column, 'minilm, smollm2') per compared column, from the results themselves."""
    if results is None:
        return []
    arms = []
    for column in ARM_COLUMNS:
        if column in results.columns:
            values = [str(v) for v in pd.unique(results[column].dropna())]
            shown = ", ".join(values[:12]) + (
                f", ... ({len(values)} in all)" if len(values) > 12 else ""
            )
            arms.append((column, shown))
    return arms


def _arm_lines(results: pd.DataFrame | None) -> list[str]:
    """'In the results, model: minilm, smollm2.' per compared column (`_arms`)."""
    return [f"In the results, {escape(c)}: {escape(v)}." for c, v in _arms(results)]


def _figure(name: str, png: bytes, size: tuple[float, float] | None, svg: str | None) -> str:
    encoded = base64.b64encode(png).decode()
    drawn = ""
    if size:
        width, height = (round(v * FIGURE_PX_PER_INCH) for v in size)
        drawn = f' width="{width}" height="{height}"'
    link = f' <a href="{escape(svg)}">vector copy (SVG)</a>' if svg else ""
    return (
        f'<figure id="figure-{_anchor(name)}">'
        f'<img alt="{escape(name)}"{drawn} src="data:image/png;base64,{encoded}">'
        f"<figcaption>{escape(name)}.{link}</figcaption></figure>"
    )


def _anchor(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")


def _claims_table(claims: list[Claim]) -> str:
    header = ("id", "statement", "quantity", "expected", "measured", "result", "why / note")
    rows = ['<div class="scroll"><table class="claims"><tr>']
    rows[0] += "".join(f"<th>{h}</th>" for h in header) + "</tr>"
    for claim in claims:
        verdict = claim.verdict
        text = claim.text + (f" ({claim.source})" if claim.source not in claim.text else "")
        if claim.paper:
            text += f". Paper: {claim.paper}"
        cells = (claim.id, text, claim.quantity, claim.expected, format_value(claim.measured))
        why = "; ".join(p for p in (claim.untested, claim.note) if p)
        rows.append(
            "<tr>"
            + "".join(f"<td>{escape(str(cell))}</td>" for cell in cells)
            + f'<td class="{verdict.lower().replace(" ", "-")}">{verdict}</td>'
            + f'<td class="why">{escape(why)}</td></tr>'
        )
    rows.append("</table></div>")
    return "\n".join(rows)


def format_value(value: Any) -> str:
    """A measured value for people: 4 significant digits, dicts as 'key: value' pairs.

    Example:
        >>> format_value({"san": 0.000123456, "skip": True})
        'san: 0.0001235, skip: true'
    """
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return "n/a" if value is None else str(value)


def tidy_table(table: pd.DataFrame) -> pd.DataFrame:
    """A table as a reader sees it: a meaningful index becomes columns, leftover index
    columns ("index", "level_0", "Unnamed: 0") and the columns' own name are dropped, and
    multi-level column names are joined.

    Example:
        >>> t = pd.DataFrame({"v": [1]}, index=pd.Index(["san"], name="variant"))
        >>> list(tidy_table(t).columns)
        ['variant', 'v']
    """
    if not isinstance(table.index, pd.RangeIndex) or table.index.name is not None:
        table = table.reset_index()
    leftover = [
        c for c in table.columns if str(c) in ("index", "level_0") or str(c).startswith("Unnamed:")
    ]
    table = table.drop(columns=leftover)
    if isinstance(table.columns, pd.MultiIndex):
        table.columns = [" ".join(str(p) for p in c if str(p)) for c in table.columns]
    table.columns = [str(c) for c in table.columns]
    table.columns.name = None
    return table


def _table_section(name: str, table: pd.DataFrame, csv: str | None) -> str:
    link = f' <a href="{escape(csv)}" download>download CSV</a>' if csv else ""
    body = table.to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}", na_rep="")
    shape = f"{len(table)} rows x {len(table.columns)} columns"
    opened = " open" if len(table) <= TABLE_ROWS_OPEN else ""
    return (
        f'<details id="table-{_anchor(name)}"{opened}><summary><b>{escape(name)}</b> '
        f'({shape}){link}</summary><div class="scroll">{body}</div></details>'
    )


def _doc_html(doc: str) -> str:
    """An experiment's docstring as HTML: paragraphs of text with `code` as <code>, a block of
    "- " items as a list, indented blocks kept as preformatted text."""
    parts = []
    for block in re.split(r"\n\s*\n", doc.strip()):
        if all(line.startswith("    ") for line in block.splitlines()):
            parts.append(f"<pre>{escape(block)}</pre>")
            continue
        lead, *items = re.split(r"^\s*- ", block, flags=re.MULTILINE)
        parts += [f"<p>{_inline(lead)}</p>"] if lead.strip() else []
        if items:
            parts.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
    return "\n".join(parts)


def _inline(text: str) -> str:
    """Escaped text on one line, `code` spans as <code>."""
    pieces = re.split(r"`([^`]+)`", " ".join(text.split()))
    return "".join(
        f"<code>{escape(p)}</code>" if i % 2 else escape(p) for i, p in enumerate(pieces)
    )
