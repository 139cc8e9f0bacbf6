"""Every finding of every experiment can fail: a hand-made table where it passes, one where it
fails, and where it has a gate one where it is NOT TESTED (docs/methods.md, sec. 7). What cannot
fail is a check, and checks are not counted here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from rankcollapse.experiments import experiment_names, get_experiment

CASES_DIR = Path(__file__).parent / "cases"


def _module(name: str):
    module_name = name.replace("-", "_")
    path = CASES_DIR / f"{module_name}.py"
    if not path.exists():
        return None
    sys.path.insert(0, str(CASES_DIR))
    try:
        spec = importlib.util.spec_from_file_location(f"cases_{module_name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CASES_DIR))
    return module


def _cases(name: str) -> dict:
    module = _module(name)
    return module.CASES if module is not None else {}


ALL = [(name, fid) for name in experiment_names() for fid in _cases(name)]


@pytest.mark.parametrize("name", experiment_names())
def test_every_finding_has_a_passing_and_a_failing_case(name: str) -> None:
    exp = get_experiment(name)
    assert exp.claims is not None, f"{name} registers no claims(config, results) function"
    module = _module(name)
    assert module is not None, f"tests/experiments/cases/{name.replace('-', '_')}.py is missing"
    cases = module.CASES
    if not cases:  # an experiment of checks only says why, and its quick run states no finding
        assert getattr(module, "CHECKS_ONLY", ""), f"{name}: no CASES and no CHECKS_ONLY reason"
        if hasattr(module, "TABLE"):  # a hand-made table, where the quick preset is slow
            config = exp.make_config("quick", module.OVERRIDES)
            results = module.TABLE
        else:
            config = exp.make_config("quick")
            results = pd.concat([exp.run_unit(config, unit) for unit in exp.units(config)])
        findings = [c.id for c in exp.claims(config, results) if c.kind != "check"]
        assert not findings, f"{name} says it states checks only, but states {findings}"
        return
    stated: set[str] = set()
    for case in cases.values():
        config = exp.make_config("quick", case.overrides)
        stated |= {c.id for c in exp.claims(config, case.passing) if c.kind != "check"}
    missing = sorted(stated - set(cases))
    assert not missing, f"{name}: findings without a hand-made case: {missing}"


@pytest.mark.parametrize(("name", "finding_id"), ALL)
def test_finding_passes_and_fails_on_hand_made_tables(name: str, finding_id: str) -> None:
    exp = get_experiment(name)
    case = _cases(name)[finding_id]
    config = exp.make_config("quick", case.overrides)
    tables = [(case.passing, "PASS"), (case.failing, "FAIL")]
    tables += [(case.untested, "NOT TESTED")] if case.untested is not None else []
    for table, expected in tables:
        claims = {c.id: c for c in exp.claims(config, table)}
        assert finding_id in claims, f"{finding_id} not stated on the {expected} table"
        claim = claims[finding_id]
        assert claim.kind != "check", f"{finding_id} is a check, not a finding"
        assert claim.verdict == expected, (
            f"{name}:{finding_id} should be {expected}, is {claim.verdict}; measured "
            f"{claim.measured!r}, expected {claim.expected}; {claim.untested} {claim.note}"
        )
