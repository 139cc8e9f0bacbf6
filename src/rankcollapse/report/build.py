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
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rankcollapse.errors import InputError, OutputError
from rankcollapse.experiments import Claim, Experiment, Summary, Tally, get_experiment
from rankcollapse.files import check_replaceable, digest, json_bytes, write_atomic
from rankcollapse.lazy import lazy_module
from rankcollapse.process import map_forked
from rankcollapse.reading import (
    MiB,
    open_bounded,
    read_bytes,
    read_json,
    read_text,
    refuse_links,
    shown,
)
from rankcollapse.report.html import KEY_META, PAGE_END, render_html, tidy_table
from rankcollapse.report.stored import (
    MAX_YAML,
    damaged,
    read_claims,
    read_config,
    read_manifest,
    read_results,
    results_sha256,
)

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure
else:  # a report kept by a fully stored run reads no table (`Report.built`)
    pd = lazy_module("pandas")

RUN_FILES = ("config.yaml", "manifest.json", "results.csv")
RECORD = ".rankcollapse-report.json"  # {file of the last build: [its sha256]}, beside them
MAX_PAGE = 1024 * MiB  # a report.html with its figures inlined is megabytes


@dataclass
class Report:
    """A run's report: its page, what it was built from, its claims and (`built`) its results
    and summary; a report kept from an earlier build (`stored_report`) has None there and
    reads results.csv and tables/ when `results` or `summary` is first used."""

    path: Path
    experiment: Experiment
    config: BaseModel
    manifest: dict[str, Any]
    claims: list[Claim]
    built: tuple[pd.DataFrame, Summary] | None = None
    kept: dict[Path, Path] = field(default_factory=dict)
    """Files of the user's (or changed since the last build) moved aside: {file: its copy}."""

    @functools.cached_property
    def _read_back(self) -> tuple[pd.DataFrame, Summary]:
        if self.built is not None:
            return self.built
        out_dir = self.path.parent
        built = sorted(_built_tables(_read_record(out_dir)))
        tables = {Path(n).stem: read_results(out_dir / n, required=()) for n in built}
        sha256 = self.manifest.get("results_sha256")
        results = read_results(out_dir / "results.csv", sha256=sha256)
        return results, Summary(tables=tables, claims=self.claims)

    @property
    def results(self) -> pd.DataFrame:
        return self._read_back[0]

    @property
    def summary(self) -> Summary:
        return self._read_back[1]


def build_report(
    out_dir: str | Path,
    experiment: Experiment | None = None,
    *,
    figures: bool = True,
    notify: Callable[[str], None] | None = None,
    processes: int = 1,
) -> Report:
    """Rebuild claims, figures, tables and `report.html` of the run stored in `out_dir`.

    `experiment` defaults to the registered one named in `manifest.json`. With
    `figures=False` no figure is drawn: the report holds the claims and tables, and
    `figures/` is left as it was. A file in the way that the last build did not write (its
    sha256 not in `RECORD`) is never replaced: it is kept beside, as NAME.mine, and `notify`
    told (`Report.kept`). The figures are drawn by up to `processes` processes (this one and
    forked children, `process.map_forked`), the bytes whichever draws them.
    """
    out_dir = Path(out_dir)
    _check_run_folder(out_dir)
    manifest = read_manifest(out_dir)
    exp = experiment if experiment is not None else _experiment_of(out_dir, manifest)
    config = read_config(out_dir, exp, sha256=manifest.get("config_hash"))
    results = read_results(out_dir / "results.csv", sha256=manifest.get("results_sha256"))
    for name in ("figures", "tables"):
        if (out_dir / name).exists() and not (out_dir / name).is_dir():
            raise damaged(
                out_dir / name,
                "a file where the report's folder belongs",
                "remove it and run `rankcollapse report` again",
            )
    for name in ("claims.json", "report.html"):
        if (out_dir / name).is_dir():
            raise damaged(
                out_dir / name,
                "a folder where the report's file belongs",
                "remove it and run `rankcollapse report` again",
            )
    record = _read_record(out_dir)
    summary, rendered, sizes = _summarize(
        out_dir, exp, config, results, figures=figures, processes=processes
    )
    tables, written, kept = _write_files(out_dir, summary, rendered, record, figures=figures)
    for path, aside in kept.items():
        if notify:
            notify(kept_note(path, aside))
    config_path = out_dir / "config.yaml"
    html = render_html(
        experiment=exp,
        config_text=read_text(
            config_path, MAX_YAML, error=lambda p: damaged(config_path, p), follow=False
        ),
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
    _write_record(out_dir, written | {"report.html": [_sha(html.encode())]})
    return Report(path, exp, config, manifest, summary.claims, (results, summary), kept)


def _check_run_folder(out_dir: Path) -> None:
    """Refuse a path that is not a folder holding a run's three files, or one holding a
    symbolic link (`refuse_links`: never followed, to read or to write). The files are looked
    for first (a link among them counts as there, then refused), so a folder that is no run
    (`report ~`) is named as such at once, not walked for links."""
    if not out_dir.is_dir():
        raise InputError(
            f"{shown(out_dir)!r} is not a folder; pass the folder of a finished run "
            "(e.g. results/toy-collapse/<hash>/, the path `rankcollapse run` "
            "printed)."
        )
    missing = [name for name in RUN_FILES if not os.path.lexists(out_dir / name)]
    if missing:
        raise InputError(
            f"{shown(out_dir)!r} has no {', '.join(missing)}; pass the folder of a finished run "
            "(e.g. results/toy-collapse/<hash>/, the path `rankcollapse run` printed)."
        )
    refuse_links(out_dir, "run folder")


def _experiment_of(out_dir: Path, manifest: dict[str, Any]) -> Experiment:
    """The registered experiment `manifest.json` names (a damaged manifest if none)."""
    try:
        return get_experiment(manifest["experiment"])
    except InputError as err:
        raise damaged(out_dir / "manifest.json", str(err).rstrip(".")) from None


def _summarize(
    out_dir: Path,
    exp: Experiment,
    config: BaseModel,
    results: pd.DataFrame,
    *,
    figures: bool,
    processes: int,
) -> tuple[Summary, dict[str, dict[str, bytes]], dict[str, tuple[float, float]]]:
    """The experiment's summary of the stored rows, with its figures rendered (when drawn)
    in the project's style by up to `processes` processes: (summary, name -> {format:
    bytes}, name -> size in inches)."""
    from rankcollapse.plot import FORMATS, style  # the one figure style (sizes, fonts, palette)

    with style.context():
        try:
            summary = exp.summarize(config, results)
        except Exception as err:  # noqa: BLE001 - rows from disk: any failure names the file
            raise damaged(
                out_dir / "results.csv",
                f"{exp.name} cannot summarize its rows: {type(err).__name__}: {err}",
            ) from None
        drawn = summary.figures if figures else {}
        pages = map_forked(_rendered, list(drawn.values()), processes)
        rendered = {
            name: dict(zip(FORMATS, files, strict=True))
            for name, files in zip(drawn, pages, strict=True)
        }
    sizes = {}
    for name, fig in drawn.items():
        width, height = fig.get_size_inches()
        sizes[name] = (float(width), float(height))
    return summary, rendered, sizes


def _rendered(fig: Figure) -> tuple[bytes, ...]:
    """`fig`'s files in the project's style, in the order of `plot.FORMATS`."""
    from rankcollapse.plot import FORMATS, style

    return tuple(style.render(fig, FORMATS)[fmt] for fmt in FORMATS)


def _write_files(
    out_dir: Path,
    summary: Summary,
    rendered: dict[str, dict[str, bytes]],
    record: dict[str, list[str]] | None,
    *,
    figures: bool,
) -> tuple[dict[str, pd.DataFrame], dict[str, list[str]], dict[Path, Path]]:
    """Write `figures/` (when drawn), `tables/` and `claims.json`, once what is in their way
    (or report.html's) that the last build did not write is kept aside (`_keep_aside`); the
    record first, taking the files of either build as ours while they are written. Returns
    the tidy tables, the record of the files written, and the files kept aside."""
    figure_files = {
        f"{_file_name(name)}.{fmt}": data
        for name, files in rendered.items()
        for fmt, data in files.items()
    }
    tables = {name: tidy_table(t) for name, t in summary.tables.items()}
    table_files = {
        f"{_file_name(n)}.csv": t.to_csv(index=False).encode() for n, t in tables.items()
    }
    claims = json_bytes([claim_record(claim) for claim in summary.claims])
    writes = {"report.html", "claims.json", *(f"tables/{name}" for name in table_files)}
    writes |= {f"figures/{name}" for name in figure_files}
    record, kept = _keep_aside(out_dir, record, writes, figures=figures)
    written = {f"tables/{name}": [_sha(data)] for name, data in table_files.items()}
    if figures:
        written |= {f"figures/{name}": [_sha(data)] for name, data in figure_files.items()}
    else:  # figures/ left as it was, and as the record had it
        written |= {k: v for k, v in record.items() if k.startswith("figures/")}
    written["claims.json"] = [_sha(claims)]
    _write_record(out_dir, {k: record.get(k, []) + written.get(k, []) for k in {*record, *written}})
    ours = {name.split("/", 1)[1] for name in record if "/" in name}  # checked: ours
    if figures:
        _replace_folder(out_dir / "figures", figure_files, ours)
    _replace_folder(out_dir / "tables", table_files, ours)
    write_atomic(out_dir / "claims.json", claims)
    return tables, written, kept


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kept_note(path: Path, aside: Path) -> str:
    """What a user is told of a file of theirs that a report kept aside."""
    return (
        f"kept {path} as {aside}: the last report did not write it (a file of your own, or one "
        "changed since); the report's own is written in its place."
    )


def _read_record(out_dir: Path) -> dict[str, list[str]] | None:
    """The record of the last build's files ({name: [sha256]}), None where there is none (a
    run folder of an older version, or none built yet)."""
    path = out_dir / RECORD
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        record = read_json(path, 64 * MiB, follow=False)
    except InputError as err:
        raise damaged(path, str(err).rstrip(".")) from None
    if not isinstance(record, dict) or not all(isinstance(v, list) for v in record.values()):
        raise damaged(path, "not the record of a report's files", "remove it and run again")
    return record


def _keep_aside(
    out_dir: Path, record: dict[str, list[str]] | None, writes: set[str], *, figures: bool
) -> tuple[dict[str, list[str]], dict[Path, Path]]:
    """Move aside (`_move_aside`) every file in the way of `writes` that the last build did not
    write; a folder without a record is an older version's, its files ours when its
    report.html bears the report's mark (`KEY_META`). Returns the record of the files that
    are ours, and {file: where it was kept}."""
    folders = ("tables", "figures") if figures else ("tables",)
    found = [out_dir / "report.html", out_dir / "claims.json"]
    found += [p for f in folders if (out_dir / f).is_dir() for p in sorted((out_dir / f).iterdir())]
    present = {
        p.relative_to(out_dir).as_posix(): p
        for p in found
        if p.is_symlink() or (p.exists() and not p.is_dir())
    }
    regular = {name: p for name, p in present.items() if p.is_file() and not p.is_symlink()}
    if record is None:
        try:
            check_replaceable(out_dir / "report.html", KEY_META)
            record = {name: [_file_sha(p)] for name, p in regular.items()}
        except OutputError:  # a page of someone else's: nothing here is known to be ours
            record = {}
    kept, theirs = {}, set()
    for name, path in present.items():
        if name in regular and _file_sha(path) in record.get(name, []):
            continue
        theirs.add(name)  # never removed
        if name in writes:
            kept[path] = _move_aside(path)
    return {k: v for k, v in record.items() if k not in theirs}, kept


def _move_aside(path: Path) -> Path:
    """Keep `path` as the first free NAME.mine, NAME.mine-2, ... beside it (never opened): a
    hard link, so `path` itself stays whole until the report's own file replaces it (a write
    that fails leaves it there); a rename where the file system has no hard links."""
    for index in range(1, 1000):
        aside = path.with_name(f"{path.name}.mine" + (f"-{index}" if index > 1 else ""))
        if not (aside.exists() or aside.is_symlink()):
            try:
                os.link(path, aside, follow_symlinks=False)
            except OSError:
                path.rename(aside)
            return aside
    raise OutputError(
        f"{str(path)!r} is in the report's way and 999 copies are kept beside it; "
        "move them away. Nothing was changed."
    )


def _file_sha(path: Path) -> str:
    with path.open("rb") as file:  # a regular file: checked by the caller
        return hashlib.file_digest(file, "sha256").hexdigest()


def _write_record(out_dir: Path, record: dict[str, list[str]]) -> None:
    write_atomic(out_dir / RECORD, json_bytes(dict(sorted(record.items()))))


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
    The page must be whole (it ends as `render_html` ends it), figures/ present when figures
    are asked for, results.csv the manifest's (its sha256) and tables/ as the last build
    wrote them (each file's sha256 the record's). The claims are read back from claims.json;
    the results and tables when first used (`Report.results`, `Report.summary`: a stored
    run's command line uses neither); the figures stay in figures/ (the summary holds none).
    `rankcollapse run` of a fully stored run uses it instead of summarizing and drawing
    again, which would write the same files."""
    out_dir = Path(out_dir)
    meta = f'<meta name="{KEY_META}" content="{report_key(experiment, manifest, figures=figures)}">'
    try:
        refuse_links(out_dir, "run folder")
        with open_bounded(out_dir / "report.html", MAX_PAGE, follow=False) as page:
            head = page.read(4096)
            end = PAGE_END.encode()
            page.seek(max(0, page.seek(0, 2) - len(end)))
            whole = page.read() == end  # not cut short, nothing added after it
        if meta.encode() not in head or not whole:
            return None
        if figures and not (out_dir / "figures").is_dir():
            return None
        if not _tables_as_built(out_dir):
            return None
        if results_sha256(out_dir / "results.csv") != manifest.get("results_sha256"):
            return None
        claims = [_claim_from_record(record) for record in read_claims(out_dir)]
        config = read_config(out_dir, experiment, sha256=manifest.get("config_hash"))
    except (InputError, OSError, ValueError, TypeError, KeyError):  # anything amiss: rebuild
        return None
    return Report(out_dir / "report.html", experiment, config, manifest, claims)


def _built_tables(record: dict[str, list[str]] | None) -> dict[str, list[str]]:
    """The tables the last build wrote ("tables/NAME.csv": [their sha256]), from its record."""
    return {name: shas for name, shas in (record or {}).items() if name.startswith("tables/")}


def _tables_as_built(out_dir: Path) -> bool:
    """Whether every table the last build wrote is in tables/ as it wrote it (its sha256 the
    record's latest); False without a record. Other files there are the user's, not read."""
    record = _read_record(out_dir)
    for name, shas in _built_tables(record).items():
        table = read_bytes(out_dir / name, MAX_PAGE, follow=False)  # FIFO: not opened
        if [hashlib.sha256(table).hexdigest()] != shas[-1:]:
            return False
    return record is not None


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
        "low": _plain(claim.low),
        "high": _plain(claim.high),
        "n_units": claim.n_units,
        "n_needed": claim.n_needed,
        "decides": claim.decides,
    }


def stored_verdict(record: dict[str, Any]) -> str:
    """PASS, FAIL or NOT TESTED of a claim read from `claims.json`; a file written before
    verdicts existed has only `passed`, read as PASS or FAIL.

    Example:
        >>> stored_verdict({"passed": False}), stored_verdict({"passed": False, "verdict": "NOT TESTED"})
        ('FAIL', 'NOT TESTED')
    """
    return record.get("verdict") or ("PASS" if record.get("passed") else "FAIL")


def stored_tally(records: list[dict[str, Any]]) -> Tally:
    """The `Tally` of the claims read from a run's `claims.json`: the same counts and line as
    the run printed and its report shows."""
    return Tally.of((r["id"], r.get("kind", "finding"), stored_verdict(r)) for r in records)


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


def _replace_folder(folder: Path, files: dict[str, bytes], ours: set[str]) -> None:
    """Write `files` into `folder` and remove what an earlier build left there (files named
    in `ours`; any other file is left alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file() and old.name not in files and old.name in ours:
            old.unlink()
    for name, data in files.items():
        write_atomic(folder / name, data)
