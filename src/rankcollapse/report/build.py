"""Build a run's report from what is stored in its folder, without recomputing any unit.

Reads `config.yaml`, `manifest.json` and `results.csv`, calls the experiment's `summarize`
on the results as read back, and writes `claims.json`, `figures/*.png` (200 dpi) with an
`.svg` copy of each, `tables/*.csv` and `report.html`. Summaries run inside the project's
figure style (`rankcollapse.plot.style`), so every figure gets its fonts and palette. `rankcollapse run` ends by calling this same function, so a rebuilt report
is byte-identical to the first one.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel

from rankcollapse.errors import InputError
from rankcollapse.experiments import Claim, Experiment, Summary, get_experiment
from rankcollapse.files import digest, json_bytes, write_atomic
from rankcollapse.reading import MiB, open_bounded, read_text
from rankcollapse.report.html import KEY_META, PAGE_END, render_html, tidy_table
from rankcollapse.report.stored import (
    MAX_YAML,
    config_hash,
    damaged,
    read_claims,
    read_config,
    read_manifest,
    read_results,
)

RUN_FILES = ("config.yaml", "manifest.json", "results.csv")
MAX_PAGE = 1024 * MiB  # a report.html with its figures inlined is megabytes


@dataclass
class Report:
    path: Path
    experiment: Experiment
    config: BaseModel
    manifest: dict[str, Any]
    results: pd.DataFrame
    summary: Summary


def build_report(
    out_dir: str | Path, experiment: Experiment | None = None, *, figures: bool = True
) -> Report:
    """Rebuild claims, figures, tables and `report.html` of the run stored in `out_dir`.

    `experiment` defaults to the registered one named in `manifest.json`. With
    `figures=False` no figure is drawn: the report holds the claims and tables, and
    `figures/` is left as it was.
    """
    out_dir = Path(out_dir)
    _check_run_folder(out_dir)
    manifest = read_manifest(out_dir)
    exp = experiment if experiment is not None else _experiment_of(out_dir, manifest)
    config = read_config(out_dir, exp)
    if manifest.get("config_hash") not in (None, config_hash(exp.name, config)):
        raise damaged(out_dir / "config.yaml", "not the config the manifest's hash names")
    results = read_results(out_dir / "results.csv", sha256=manifest.get("results_sha256"))
    for name in ("figures", "tables"):
        if (out_dir / name).exists() and not (out_dir / name).is_dir():
            raise damaged(
                out_dir / name,
                "a file where the report's folder belongs",
                "remove it and run `rankcollapse report` again",
            )
    summary, rendered, sizes = _summarize(out_dir, exp, config, results, figures=figures)
    tables = _write_files(out_dir, summary, rendered, figures=figures)
    config_path = out_dir / "config.yaml"
    html = render_html(
        experiment=exp,
        config_text=read_text(config_path, MAX_YAML, error=lambda p: damaged(config_path, p)),
        manifest=manifest,
        summary=summary,
        pngs={name: files["png"] for name, files in rendered.items()},
        sizes=sizes,
        svgs={name: f"figures/{_file_name(name)}.svg" for name in rendered},
        csvs={name: f"tables/{_file_name(name)}.csv" for name in tables},
        results=results,
        key=report_key(exp, manifest, figures=figures),
    )
    path = out_dir / "report.html"
    write_atomic(path, html.encode())
    return Report(path, exp, config, manifest, results, summary)


def _check_run_folder(out_dir: Path) -> None:
    """Refuse a path that is not a folder holding a run's three files."""
    if not out_dir.is_dir():
        raise InputError(
            f"{str(out_dir)!r} is not a folder; pass the folder of a finished run "
            "(e.g. results/toy-collapse/<hash>/, the path `rankcollapse run` "
            "printed)."
        )
    missing = [name for name in RUN_FILES if not (out_dir / name).exists()]
    if missing:
        raise InputError(
            f"{str(out_dir)!r} has no {', '.join(missing)}; pass the folder of a finished run "
            "(e.g. results/toy-collapse/<hash>/, the path `rankcollapse run` printed)."
        )


def _experiment_of(out_dir: Path, manifest: dict[str, Any]) -> Experiment:
    """The registered experiment `manifest.json` names (a damaged manifest if none)."""
    try:
        return get_experiment(manifest["experiment"])
    except InputError as err:
        raise damaged(out_dir / "manifest.json", str(err).rstrip(".")) from None


def _summarize(
    out_dir: Path, exp: Experiment, config: BaseModel, results: pd.DataFrame, *, figures: bool
) -> tuple[Summary, dict[str, dict[str, bytes]], dict[str, tuple[float, ...]]]:
    """The experiment's summary of the stored rows, with its figures rendered (when drawn)
    in the project's style: (summary, name -> {format: bytes}, name -> size in inches)."""
    from rankcollapse.plot import style  # the one figure style (sizes, fonts, palette)

    with style.context():
        try:
            summary = exp.summarize(config, results)
        except Exception as err:  # noqa: BLE001 - rows from disk: any failure names the file
            raise damaged(
                out_dir / "results.csv",
                f"{exp.name} cannot summarize its rows: {type(err).__name__}: {err}",
            ) from None
        drawn = summary.figures if figures else {}
        rendered = {name: style.render(fig) for name, fig in drawn.items()}
    sizes = {name: tuple(fig.get_size_inches()) for name, fig in drawn.items()}
    return summary, rendered, sizes


def _write_files(
    out_dir: Path, summary: Summary, rendered: dict[str, dict[str, bytes]], *, figures: bool
) -> dict[str, pd.DataFrame]:
    """Write `figures/` (when drawn), `tables/` and `claims.json`; return the tidy tables."""
    figure_files = {
        f"{_file_name(name)}.{fmt}": data
        for name, files in rendered.items()
        for fmt, data in files.items()
    }
    if figures:
        _replace_folder(out_dir / "figures", figure_files)
    tables = {name: tidy_table(t) for name, t in summary.tables.items()}
    _replace_folder(
        out_dir / "tables",
        {f"{_file_name(n)}.csv": t.to_csv(index=False).encode() for n, t in tables.items()},
    )
    claims = [claim_record(claim) for claim in summary.claims]
    write_atomic(out_dir / "claims.json", json_bytes(claims))
    return tables


def report_key(experiment: Experiment, manifest: dict[str, Any], *, figures: bool) -> str:
    """What a report is built from: the run's config and results (their hashes in the
    manifest), whether figures were drawn, the experiment, and the code (`code_digest`).
    `report.html` carries it in its head."""
    return digest(
        [
            experiment.name,
            f"{experiment.summarize.__module__}.{experiment.summarize.__qualname__}",
            manifest.get("config_hash"),
            manifest.get("results_sha256"),
            figures,
            code_digest(),
        ]
    )


@functools.cache
def code_digest() -> str:
    """sha256 over the package's source and data files (paths and bytes): any edit to the
    code that summarizes and draws a run changes it."""
    root = Path(__file__).resolve().parents[1]
    hasher = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".json")):
        hasher.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()


def stored_report(
    out_dir: str | Path, experiment: Experiment, manifest: dict[str, Any], *, figures: bool = True
) -> Report | None:
    """The report already in `out_dir` when `build_report` made it from the same results,
    config, figure setting and code as `manifest` names now (the key in its head), else None.
    The page must be whole (it ends as `render_html` ends it) and figures/ present when figures
    are asked for. The summary's claims and tables are read back from claims.json and tables/;
    its figures stay in figures/ (the summary holds none). `rankcollapse run` of a fully stored run uses
    it instead of summarizing and drawing again, which would write the same files."""
    out_dir = Path(out_dir)
    meta = f'<meta name="{KEY_META}" content="{report_key(experiment, manifest, figures=figures)}">'
    try:
        with open_bounded(out_dir / "report.html", MAX_PAGE) as page:
            head = page.read(4096)
            end = PAGE_END.encode()
            page.seek(max(0, page.seek(0, 2) - len(end)))
            whole = page.read() == end  # not cut short, nothing added after it
        if meta.encode() not in head or not whole:
            return None
        if figures and not (out_dir / "figures").is_dir():
            return None
        claims = [_claim_from_record(record) for record in read_claims(out_dir)]
        tables = {  # checked as results.csv is: a damaged table rebuilds the report
            p.stem: read_results(p, required=()) for p in sorted((out_dir / "tables").glob("*.csv"))
        }
        config = read_config(out_dir, experiment)
        results = read_results(out_dir / "results.csv", sha256=manifest.get("results_sha256"))
    except (InputError, OSError, ValueError, TypeError, KeyError):  # anything amiss: rebuild
        return None
    summary = Summary(tables=tables, claims=claims)
    return Report(out_dir / "report.html", experiment, config, manifest, results, summary)


def _claim_from_record(record: dict[str, Any]) -> Claim:
    """A `claim_record` read back (a non-finite measured value was stored as null: NaN)."""
    fields = {k: v for k, v in record.items() if k not in ("expected", "verdict")}
    fields["measured"] = math.nan if record["measured"] is None else record["measured"]
    return Claim(**fields)


def claim_record(claim: Claim) -> dict[str, Any]:
    """A claim as plain JSON (non-finite numbers become null)."""
    return {
        "id": claim.id,
        "kind": claim.kind,
        "text": claim.text,
        "quantity": claim.quantity,
        "relation": claim.relation,
        "threshold": _plain(claim.threshold),
        "expected": claim.expected,
        "measured": _plain(claim.measured),
        "passed": bool(claim.passed),
        "verdict": claim.verdict,
        "untested": claim.untested,
        "note": claim.note,
        "source": claim.source,
        "paper": claim.paper,
    }


def stored_verdict(record: dict[str, Any]) -> str:
    """PASS, FAIL or NOT TESTED of a claim read from `claims.json`; a file written before
    verdicts existed has only `passed`, read as PASS or FAIL.

    Example:
        >>> stored_verdict({"passed": False}), stored_verdict({"passed": False, "verdict": "NOT TESTED"})
        ('FAIL', 'NOT TESTED')
    """
    return record.get("verdict") or ("PASS" if record.get("passed") else "FAIL")


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # numpy / torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"


def _replace_folder(folder: Path, files: dict[str, bytes]) -> None:
    """Write `files` into `folder` and remove what an earlier build left there."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file() and old.name not in files:
            old.unlink()
    for name, data in files.items():
        write_atomic(folder / name, data)
