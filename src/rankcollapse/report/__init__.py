"""Reports of stored runs: `build_report(DIR)` re-derives claims, figures and tables from
`DIR/results.csv` through the experiment's `summarize` and writes one self-contained
`report.html`, without recomputing any unit; `write_index(results/)` lists every stored run."""

from rankcollapse.report.build import (
    Report,
    build_report,
    claim_record,
    kept_note,
    stored_report,
    stored_verdict,
)
from rankcollapse.report.html import format_value, render_html, tidy_table
from rankcollapse.report.index import write_index
from rankcollapse.report.reproduction import reproduction_table, write_reproduction
from rankcollapse.report.stored import (
    DamagedFileError,
    config_hash,
    damaged,
    folder_kind,
    read_claims,
    read_config,
    read_manifest,
    read_results,
    results_sha256,
)

__all__ = [
    "DamagedFileError",
    "Report",
    "build_report",
    "claim_record",
    "config_hash",
    "damaged",
    "folder_kind",
    "format_value",
    "kept_note",
    "read_claims",
    "read_config",
    "read_manifest",
    "read_results",
    "render_html",
    "reproduction_table",
    "results_sha256",
    "stored_report",
    "stored_verdict",
    "tidy_table",
    "write_index",
    "write_reproduction",
]
