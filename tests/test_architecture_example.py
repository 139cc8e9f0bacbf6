"""The worked example of docs/architecture.md is real code: it registers, runs and reports."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

from rankcollapse.experiments import _registry
from rankcollapse.runner import run_experiment

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_the_worked_example_runs_and_its_finding_passes(tmp_path: Path) -> None:
    source = re.search(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL).group(1)
    assert len(source.splitlines()) < 80
    module = types.ModuleType("skip_demo")  # a real module, as the file would be
    sys.modules["skip_demo"] = module
    try:
        exec(compile(source, str(DOC), "exec"), module.__dict__)  # noqa: S102 - our doc's code
        run = run_experiment("skip-demo", out=tmp_path / "run")
    finally:
        _registry._REGISTRY.pop("skip-demo", None)
        sys.modules.pop("skip_demo", None)
    claim = {c.id: c for c in run.claims}["skip-keeps-residual"]
    assert claim.kind == "finding" and claim.passed, claim
    assert run.report_path.is_file() and (tmp_path / "run" / "results.csv").is_file()
