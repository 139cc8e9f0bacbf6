"""Code, docs and reports cite the papers and this repository's docs/, never a file a reader
does not have (the method notes behind the code live in docs/methods.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNREACHABLE = re.compile(
    r"spec (dong2021|wu2024|amsel2024)\.md|\b(dong2021|wu2024|amsel2024)\.md sec"
    r"|hf-notes\.md|numerics\.md|offline\.md"
)


def test_no_file_cites_a_document_outside_the_repository() -> None:
    files = [ROOT / "README.md", *ROOT.glob("src/**/*.py"), *ROOT.glob("docs/**/*.md")]
    files += [path for path in ROOT.glob("tests/**/*.py") if path != Path(__file__)]
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if UNREACHABLE.search(line)
    ]
    assert not offenders, "cite the paper or docs/methods.md instead:\n" + "\n".join(offenders)


def test_docs_cited_by_the_code_exist() -> None:
    cited = {
        match
        for path in ROOT.glob("src/**/*.py")
        for match in re.findall(r"docs/[\w./-]+\.md", path.read_text())
    }
    missing = sorted(c for c in cited if not (ROOT / c).exists())
    assert not missing, f"docstrings cite docs that do not exist: {missing}"
