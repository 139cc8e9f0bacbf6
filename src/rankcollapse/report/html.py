"""One self-contained HTML page per run: what ran, the config, the claims, every figure and
table. Figures are embedded as base64 PNG, styles are inline, nothing is fetched, and the
only times on the page are those recorded in the manifest (so rebuilding is byte-identical).
"""

from __future__ import annotations

import base64
import inspect
import json
import math
from html import escape
from typing import Any

import pandas as pd

from rankcollapse.experiments import Claim, Experiment, Summary

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
table { border-collapse: collapse; font-size: .85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.pass { background: #d9f2d9; color: #165c16; font-weight: bold; }
td.fail { background: #f8d7d7; color: #8a1111; font-weight: bold; }
.summary { font-size: 1.05em; padding: .6em; background: #eef3fa; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: .85em; color: #555; }
"""


def render_html(
    *,
    experiment: Experiment,
    config_text: str,
    manifest: dict[str, Any],
    summary: Summary,
    pngs: dict[str, bytes],
) -> str:
    """The report page; `pngs` maps figure name to PNG bytes, in the summary's order."""
    claims = summary.claims
    n_passed = sum(claim.passed for claim in claims)
    doc = inspect.getdoc(inspect.getmodule(experiment.run_unit)) or experiment.description
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(experiment.name)}: rankcollapse report</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{escape(experiment.name)}</h1>",
        f"<p>{escape(experiment.description)}</p>",
        f'<p class="summary">{escape(_summary_line(manifest, n_passed, len(claims)))}</p>',
        "<h2>What was run</h2>",
        f"<pre>{escape(doc)}</pre>",
        "<h2>Claims</h2>",
        _claims_table(claims) if claims else "<p>This experiment states no claims.</p>",
    ]
    if summary.notes:
        parts += ["<h2>Notes</h2>", "<ul>"]
        parts += [f"<li>{escape(note)}</li>" for note in summary.notes]
        parts += ["</ul>"]
    parts.append("<h2>Figures</h2>")
    for name, data in pngs.items():
        encoded = base64.b64encode(data).decode()
        parts += [
            f'<figure id="figure-{escape(name.replace(" ", "-"))}">',
            f'<img alt="{escape(name)}" src="data:image/png;base64,{encoded}">',
            f"<figcaption>{escape(name)}</figcaption></figure>",
        ]
    if summary.tables:
        parts.append("<h2>Tables</h2>")
        for name, table in summary.tables.items():
            parts += [f'<h3 id="table-{escape(name)}">{escape(name)}</h3>', _table(table)]
    parts += [
        "<h2>Config</h2>",
        f"<pre>{escape(config_text)}</pre>",
        "<h2>Manifest</h2>",
        f"<pre>{escape(json.dumps(manifest, indent=2, default=str))}</pre>",
        "</body></html>",
        "",
    ]
    return "\n".join(parts)


def _summary_line(manifest: dict[str, Any], n_passed: int, n_claims: int) -> str:
    packages = manifest.get("packages", {})
    return (
        f"{n_passed} of {n_claims} claims passed. "
        f"Preset {manifest.get('preset')}, config {str(manifest.get('config_hash'))[:10]}, "
        f"{manifest.get('n_units')} units ({manifest.get('n_cached')} reused from an earlier run), "
        f"jobs {manifest.get('jobs')}; rankcollapse {packages.get('rankcollapse')}, "
        f"torch {packages.get('torch')}; ran {manifest.get('started')} to "
        f"{manifest.get('finished')} on {manifest.get('host')}."
    )


def _claims_table(claims: list[Claim]) -> str:
    header = ("id", "claim", "quantity", "expected", "measured", "result", "note")
    rows = ['<table class="claims"><tr>' + "".join(f"<th>{h}</th>" for h in header) + "</tr>"]
    for claim in claims:
        verdict = "pass" if claim.passed else "fail"
        cells = (claim.id, claim.text, claim.quantity, claim.expected, format_value(claim.measured))
        rows.append(
            "<tr>"
            + "".join(f"<td>{escape(str(cell))}</td>" for cell in cells)
            + f'<td class="{verdict}">{verdict.upper()}</td><td>{escape(claim.note)}</td></tr>'
        )
    rows.append("</table>")
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


def _table(table: pd.DataFrame) -> str:
    return table.to_html(index=False, border=0, float_format=lambda v: f"{v:.4g}", na_rep="")
