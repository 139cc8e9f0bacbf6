"""The one decision rule: PASS, FAIL and NOT TESTED from an interval over units, the units that
would decide a NOT TESTED, assumptions, "for every" members, and no rule of an experiment's own."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from rankcollapse.experiments import (
    MODULES,
    Assumption,
    Quote,
    decide,
    finding,
    for_every,
    t_quantile,
)

SAYS = Quote("pure attention loses rank", "Thm 2.2")


@pytest.mark.parametrize(
    ("values", "side", "verdict"),
    [
        ([-1.0, -1.1, -0.9], "<", "PASS"),
        ([1.0, 1.1, 0.9], "<", "FAIL"),
        ([1.0, 1.1, 0.9], ">", "PASS"),
        ([-1.0, -1.1, -0.9], ">", "FAIL"),
        ([-1.0, 1.0, -0.5, 0.6], "<", "NOT TESTED"),
        ([-1.0, 1.0, -0.5, 0.6], ">", "NOT TESTED"),
    ],
)
def test_the_rule_is_two_sided(values, side, verdict):
    assert decide(values, side).verdict == verdict


def test_the_interval_is_mean_plus_minus_t_standard_errors():
    values = [1.0, 2.0, 4.0, 5.0]
    d = decide(values, ">", margin=0.0)
    se = np.std(values, ddof=1) / 2
    t = 3.182446305284263  # Student's t, 97.5 % quantile, 3 degrees of freedom
    assert (d.mean, d.se, d.n, t_quantile(4)) == (3.0, pytest.approx(se), 4, pytest.approx(t))
    assert (d.low, d.high) == (pytest.approx(3 - t * se), pytest.approx(3 + t * se))


def test_two_units_decide_only_what_lies_far_beyond_their_spread():
    assert decide([-1.0, -1.05], "<").verdict == "PASS"  # 12.7 se = 0.32 < 1.025
    assert decide([-1.0, -1.5], "<").verdict == "NOT TESTED"  # z = 1.96 would say PASS


def test_the_units_needed_decide_at_the_same_spread():
    rng = np.random.default_rng(0)
    few = np.array([0.5, -0.3, 0.9, -0.6, 0.4, 0.1, -0.2, 0.3])  # mean 0.14, sd 0.5
    d = decide(few, ">")
    assert d.verdict == "NOT TESTED" and d.n_needed is not None
    # n_needed units of the same mean and sd put the interval wholly above the margin
    base = rng.normal(size=d.n_needed)
    more = few.mean() + few.std(ddof=1) * (base - base.mean()) / base.std(ddof=1)
    assert decide(more * 1.001, ">").verdict == "PASS"
    assert decide(more[: d.n_needed // 2], ">").verdict == "NOT TESTED"


def test_nan_or_diverged_units_fail_and_one_unit_decides_nothing():
    assert decide([-1.0, None], "<").verdict == "FAIL"
    assert decide([-1.0, math.inf], "<").verdict == "FAIL"
    one = decide([-5.0], "<")
    assert one.verdict == "NOT TESTED" and "at least 2" in one.reason
    assert decide([], "<").verdict == "NOT TESTED"


def test_a_constant_sample_on_the_margin_fails_and_off_it_is_decided():
    assert decide([0.0, 0.0], "<").verdict == "FAIL"
    assert decide([-1.0, -1.0], "<").verdict == "PASS"


def test_a_finding_outside_its_assumptions_is_not_tested_whatever_its_values():
    broken = Assumption("A3: bounded value maps", False, "states reach 1e37")
    claim = finding("f", says=SAYS, text="t", quantity="q", values=[5.0, 5.1], side="<",
                    assumptions=[broken])  # fmt: skip
    assert claim.verdict == "NOT TESTED"
    assert claim.untested == "assumptions not met: A3: bounded value maps (states reach 1e37)"


def test_a_fail_says_what_the_paper_says_and_what_we_measure():
    claim = finding("f", says=SAYS, text="t", quantity="q", values=[1.0, 1.1, 1.2], side="<")
    assert claim.verdict == "FAIL"
    assert claim.note.startswith('the paper says "pure attention loses rank" (Thm 2.2); we measure')
    assert (claim.source, claim.paper, claim.n_units) == ("Thm 2.2", SAYS.text, 3)


def test_a_not_tested_names_what_decides_it():
    claim = finding("f", says=SAYS, text="t", quantity="q", values=[-1.0, 0.8, -0.9, 0.7],
                    side="<", decides="--preset paper (12 seeds)")  # fmt: skip
    assert claim.verdict == "NOT TESTED"
    assert claim.untested.startswith("preset too small: mean")
    assert claim.untested.endswith("; --preset paper (12 seeds) decides it")
    assert claim.n_needed and claim.n_needed > 4


MEMBERS = {"a": [-1.0, -1.1], "b": [-2.0, -2.2]}


def _every(members, **options):
    return for_every("e", says=SAYS, text="t", quantity="q", side="<", members=members,
                     expected=["a", "b"], **options)  # fmt: skip


def test_for_every_passes_when_each_member_passes():
    assert _every(MEMBERS).verdict == "PASS"


@pytest.mark.parametrize(
    "members",
    [
        {"a": [-1.0, -1.1]},  # b missing
        {"a": [-1.0, -1.1], "b": None},  # b diverged
        {"a": [-1.0, -1.1], "b": [1.0, 1.1]},  # b on the other side
        {"a": [-1.0, float("nan")], "b": [-2.0, -2.2]},  # a NaN unit
    ],
)
def test_for_every_fails_on_one_missing_diverged_or_failing_member(members):
    claim = _every(members)
    assert claim.verdict == "FAIL" and 'the paper says "' in claim.note


def test_for_every_is_not_tested_while_a_member_straddles():
    claim = _every({"a": [-1.0, -1.1], "b": [-1.0, 0.9, -0.8]})
    assert claim.verdict == "NOT TESTED" and claim.untested.startswith("b: preset too small")


def test_for_every_excludes_by_name_and_decides_on_the_rest():
    claim = _every({"a": [-1.0, -1.1]}, excluded={"b": "no centre node"})
    assert claim.verdict == "PASS" and "excluded by config (1): b (no centre node)" in claim.note
    unmet = {"b": [Assumption("A2", False, "dropout")]}
    claim = _every({"a": [-1.0, -1.1], "b": [5.0, 5.0]}, assumptions=unmet)
    assert claim.verdict == "PASS" and "b: assumptions not met: A2 (dropout)" in claim.note
    every_unmet = {"a": unmet["b"], "b": unmet["b"]}
    assert _every(MEMBERS, assumptions=every_unmet).verdict == "NOT TESTED"


EXPERIMENTS = Path(__file__).parents[2] / "src" / "rankcollapse" / "experiments"
OWN_RULES = re.compile(
    r"\.std\(|\.sem\(|np\.std|np\.nanstd|standard error|seeds_agree|_deciding|within one "
    r"(standard deviation|sd)|from rankcollapse\.experiments\._registry import .*\b(finding|for_every)\b"
)


@pytest.mark.parametrize("module", sorted(MODULES.values()))
def test_no_experiment_decides_with_a_spread_rule_of_its_own(module):
    source = (EXPERIMENTS / f"{module}.py").read_text()
    own = [line.strip() for line in source.splitlines() if OWN_RULES.search(line)]
    assert not own, f"{module} decides with a rule of its own (use experiments.verdicts): {own}"
