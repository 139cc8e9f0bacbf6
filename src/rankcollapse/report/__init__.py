"""Reports of stored runs: `build_report(DIR)` re-derives claims, figures and tables from
`DIR/results.csv` through the experiment's `summarize` and writes one self-contained
`report.html`, without recomputing any unit; `write_index(results/)` lists every stored run."""

from rankcollapse.report.build import (
    Report,
    build_report,
    claim_record,
    read_results,
    stored_verdict,
)
from rankcollapse.report.html import format_value, render_html, tidy_table
from rankcollapse.report.index import write_index
from rankcollapse.report.reproduction import reproduction_table, write_reproduction

__all__ = [
    "Report",
    "build_report",
    "claim_record",
    "format_value",
    "read_results",
    "render_html",
    "reproduction_table",
    "stored_verdict",
    "tidy_table",
    "write_index",
    "write_reproduction",
]
