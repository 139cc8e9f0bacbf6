"""The one decision rule: a paper's sentence tested on its own setting by an interval over units.

Every finding of every experiment is decided here, and nowhere else (docs/methods.md, sec. 7):

- the experiment supplies the paper's sentence (`Quote`, verbatim, with its locator), the
  quantity that sentence is about, the side of the margin the paper puts it on, the margin,
  the units the quantity is measured over (samples, seeds, members) and the theorem's
  assumptions as predicates (`Assumption`);
- `decide` takes the units' mean and standard error se = sd / sqrt(n) and the interval
  mean +- t se, t the two-sided Student quantile of `LEVEL` (stated once, below) at n - 1
  degrees of freedom: PASS when the interval lies on the paper's side of the margin, FAIL when
  it lies on the other side, NOT TESTED when it straddles the margin, with the number of units
  n* that would decide it at the measured spread (the least n with t_n sd / sqrt(n) below
  |mean - margin|);
- a NaN or diverged unit fails; fewer than two units have no spread and decide nothing;
- a member outside the theorem's assumptions is NOT TESTED by rule, the assumption named.

`for_every` applies the rule to each member of a "for every" statement (every mask, model,
seed): one failing, NaN, diverged or missing member fails it, unless the config excludes it by
name (the note counts them); a member whose interval straddles leaves it NOT TESTED.

`Tally` counts the verdicts once for every reader: the run's summary line, the report's summary
box, `report --index`, `make demo`'s last line and `rankcollapse reproduce`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from rankcollapse.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

LEVEL = 0.95
"""The two-sided confidence of every finding's interval: the one spread rule."""


@functools.lru_cache(maxsize=256)
def t_quantile(n: int) -> float:
    """The interval's half-width in standard errors for `n` units: Student's t quantile of
    (1 + LEVEL) / 2 at n - 1 degrees of freedom (12.7 for 2 units, 2.26 for 10, 1.96 in the
    limit); a normal quantile would claim 95 % where two units give 70 %.

    Example:
        >>> round(t_quantile(2), 2), round(t_quantile(10), 2), round(t_quantile(10**6), 2)
        (12.71, 2.26, 1.96)
    """
    # scipy.special's inverse of Student's t (what scipy.stats.t.ppf calls): scipy.stats
    # takes about 1 s more to import, paid by every report
    from scipy.special import stdtrit

    return float(stdtrit(n - 1, (1 + LEVEL) / 2))


def units_needed(n: int, sd: float, gap: float) -> int:
    """The least number of units (at least `n`) whose interval, at spread `sd`, no longer
    reaches across `gap` = |mean - margin|.

    Example:
        >>> units_needed(4, 1.0, 0.5)
        18
    """
    needed = max(n, math.ceil(min((1.96 * sd / gap) ** 2, 1e7)))  # the normal limit: a lower bound
    while needed < 10**7 and t_quantile(needed) * sd / math.sqrt(needed) >= gap:
        needed += 1
    return needed


Kind = Literal["finding", "beyond", "check"]
Verdict = Literal["PASS", "FAIL", "NOT TESTED"]
VERDICTS: tuple[Verdict, ...] = ("PASS", "FAIL", "NOT TESTED")
Side = Literal["<", ">"]
Relation = Literal["<", "<=", ">", ">=", "true"]

# Why a finding is NOT TESTED: the causes, each a prefix of the reason a claim carries.
NOT_LEARNED = "not learned"  # an arm the finding compares did not beat its trivial baseline
MISSING = "member missing"  # kept for stored runs; a missing member now fails `for_every`
TOO_SMALL = "preset too small"  # the interval straddles the margin: more units would decide it
UNMET = "assumptions not met"  # the run breaks an assumption of the theorem the finding tests


@dataclass(frozen=True)
class Quote:
    """A paper's sentence, verbatim, and where it stands ("Sec. 5", "Thm 1", "Fig. 2")."""

    text: str
    where: str


@dataclass(frozen=True)
class Assumption:
    """A theorem's assumption, evaluated on this run: whether it holds, and why not."""

    name: str
    holds: bool
    why: str = ""

    def __str__(self) -> str:
        return f"{self.name} ({self.why})" if self.why else self.name


@dataclass(frozen=True)
class Decision:
    """The rule's answer for one set of units."""

    verdict: Verdict
    n: int
    mean: float
    se: float
    """Standard error: sd / sqrt(n) (NaN for fewer than two units)."""
    n_needed: int | None = None
    """Units that would decide it at the measured spread (NOT TESTED by spread only)."""
    reason: str = ""
    """Why NOT TESTED or FAIL, when not from the interval alone (NaN units, too few units)."""

    @property
    def half_width(self) -> float:
        return t_quantile(self.n) * self.se if self.n > 1 else math.nan

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def describe(self) -> str:
        """The interval in words, e.g. 'mean -0.31, 95% interval [-0.4, -0.22] over 8 units'."""
        if self.n == 0 or math.isnan(self.mean):
            return f"no finite value over {self.n} units"
        if self.n == 1 or math.isnan(self.se):
            return f"{self.mean:.3g} from one unit"
        return (
            f"mean {self.mean:.3g}, {LEVEL:.0%} interval [{self.low:.3g}, {self.high:.3g}] "
            f"over {self.n} units"
        )


def decide(values: Iterable[float | None], side: Side, margin: float = 0.0) -> Decision:
    """PASS, FAIL or NOT TESTED for `values` (one per unit) against `side margin`.

    Formula: se = sd / sqrt(n) (sd with n - 1), t = `t_quantile(n)`; PASS when mean - t se >
    margin (side ">") or mean + t se < margin (side "<"); FAIL when the interval lies wholly
    on the other side or any unit is NaN or diverged (None); NOT TESTED when it straddles the
    margin, with the `units_needed` that would decide it; one unit has no spread.

    Example:
        >>> decide([-1.0, -1.2, -0.9], "<").verdict
        'PASS'
        >>> decide([0.5, 0.4, 0.6], "<").verdict
        'FAIL'
        >>> d = decide([-0.1, 0.05, -0.2, 0.1], "<")
        >>> d.verdict, d.n_needed
        ('NOT TESTED', 55)
        >>> decide([-1.0, float("nan")], "<").reason
        '1 of 2 units NaN or diverged'
        >>> decide([-1.0], "<").verdict
        'NOT TESTED'
    """
    raw = [math.nan if v is None else float(v) for v in values]
    n, bad = len(raw), sum(not math.isfinite(v) for v in raw)
    if n == 0:
        return Decision("NOT TESTED", 0, math.nan, math.nan, reason=f"{TOO_SMALL}: no units")
    if bad:
        return Decision("FAIL", n, math.nan, math.nan, reason=f"{bad} of {n} units NaN or diverged")
    arr = np.asarray(raw)
    mean = float(arr.mean())
    if n == 1:
        reason = f"{TOO_SMALL}: one unit has no spread; at least 2 are needed"
        return Decision("NOT TESTED", 1, mean, math.nan, reason=reason)
    sd = float(arr.std(ddof=1))
    se = sd / math.sqrt(n)
    low, high = mean - t_quantile(n) * se, mean + t_quantile(n) * se
    paper_side = low > margin if side == ">" else high < margin
    other_side = high < margin if side == ">" else low > margin
    if paper_side:
        return Decision("PASS", n, mean, se)
    if other_side or (sd == 0.0 and mean == margin):
        return Decision("FAIL", n, mean, se)
    needed = units_needed(n, sd, abs(mean - margin)) if mean != margin else None
    return Decision("NOT TESTED", n, mean, se, n_needed=needed)


@dataclass(frozen=True)
class Claim:
    """A statement tested on this run's measurements: PASS, FAIL or NOT TESTED.

    Three kinds, reported apart (docs/methods.md, sec. 7): a *finding* tests a paper's sentence
    on the paper's own setting; a *beyond* finding tests the project's own extension the same
    way, listed apart; a *check* is an identity or construction that holds by design (it guards
    the code, it is not evidence for a paper). Findings are made by `finding` and `for_every`
    (the one rule), checks by `check`. `paper` is the sentence and `source` its locator;
    `low`/`high` the deciding interval, `n_units` its units and `n_needed` how many would
    decide a NOT TESTED; `decides` names the preset that decides it.
    """

    id: str
    kind: Kind
    text: str
    quantity: str
    relation: Relation
    threshold: float | None
    measured: Any
    passed: bool
    note: str = ""
    source: str = ""
    paper: str = ""
    untested: str = ""
    """Why the evidence cannot decide it (TOO_SMALL, NOT_LEARNED, UNMET first); empty when
    decided."""
    low: float | None = None
    high: float | None = None
    n_units: int | None = None
    n_needed: int | None = None
    decides: str = ""

    @property
    def expected(self) -> str:
        return "true" if self.relation == "true" else f"{self.relation} {self.threshold:g}"

    @property
    def verdict(self) -> Verdict:
        if self.untested:
            return "NOT TESTED"
        return "PASS" if self.passed else "FAIL"


def _unmet(assumptions: Sequence[Assumption]) -> str:
    broken = [str(a) for a in assumptions if not a.holds]
    return f"{UNMET}: {'; '.join(broken)}" if broken else ""


def _untested(decision: Decision, decides: str) -> str:
    """The NOT TESTED reason of a decision: what straddles, and what would decide it."""
    if decision.verdict != "NOT TESTED":
        return ""
    run = f"; {decides} decides it" if decides else ""
    if decision.reason:
        return decision.reason + run
    more = f"; about {decision.n_needed} units at this spread would decide it"
    return (
        f"{TOO_SMALL}: {decision.describe()} straddles the margin"
        + (more if decision.n_needed else "")
        + run
    )


def _fail_note(quote: Quote, decision: Decision, side: Side, margin: float) -> str:
    """A FAIL reads: the paper says X (where); we measure Y on its own setting."""
    measured = decision.reason or f"{decision.describe()}, not {side} {margin:g}"
    return f'the paper says "{quote.text}" ({quote.where}); we measure {measured}'


def finding(
    id: str,
    *,
    says: Quote,
    text: str,
    quantity: str,
    values: Iterable[float | None],
    side: Side,
    margin: float = 0.0,
    assumptions: Sequence[Assumption] = (),
    decides: str = "",
    note: str = "",
    beyond: bool = False,
) -> Claim:
    """A paper's sentence decided by the one rule over `values`, one per unit.

    `text` is the project's one-line statement of it; `decides` names the preset (seeds,
    samples) that decides it when this run cannot; an assumption that does not hold makes it
    NOT TESTED whatever the values; `beyond=True` marks the project's own extension.

    Example:
        >>> q = Quote("pure attention loses rank doubly exponentially", "Thm 2.2")
        >>> finding("c", says=q, text="t", quantity="slope", values=[-2.0, -1.8, -2.1],
        ...         side="<").verdict
        'PASS'
        >>> finding("c", says=q, text="t", quantity="slope", values=[-2.0, -1.8],
        ...         side="<", assumptions=[Assumption("A2", False, "values grow")]).untested
        'assumptions not met: A2 (values grow)'
    """
    decision = decide(values, side, margin)
    unmet = _unmet(assumptions)
    untested = unmet or _untested(decision, decides)
    fail = decision.verdict == "FAIL" and not unmet
    parts = [_fail_note(says, decision, side, margin)] if fail else [decision.describe()]
    passed = decision.verdict == "PASS" and not unmet
    stated = (id, beyond, text, quantity, side, margin, says)
    return _claim(*stated, decision, passed, [*parts, note], untested, decision.n_needed, decides)


def for_every(
    id: str,
    *,
    says: Quote,
    text: str,
    quantity: str,
    members: Mapping[str, Iterable[float | None] | None],
    side: Side,
    margin: float = 0.0,
    expected: Sequence[str],
    excluded: Mapping[str, str] | None = None,
    assumptions: Mapping[str, Sequence[Assumption]] | None = None,
    decides: str = "",
    note: str = "",
    beyond: bool = False,
) -> Claim:
    """A sentence that must hold for every member, each member decided by the one rule.

    `members` maps a member's name to its units' values (None: diverged). Every name in
    `expected` not in `excluded` (name -> reason, from the config) is decided by `decide`: one
    FAIL, or a member missing, fails the finding; else one NOT TESTED (interval straddling)
    leaves it NOT TESTED with the most units any member needs; else it passes. A member with an
    assumption (from `assumptions`, name -> predicates) that does not hold is NOT TESTED by rule
    and the rest decide; none left: NOT TESTED. `measured` is the deciding member's mean.

    Example:
        >>> q = Quote("every mask collapses", "Thm 1")
        >>> c = for_every("all", says=q, text="t", quantity="slope", side="<",
        ...               members={"a": [-1.0, -1.1], "b": [float("nan"), -1.0]},
        ...               expected=["a", "b", "c"])
        >>> c.verdict, c.note.split("we measure ")[1]
        ('FAIL', 'b: 1 of 2 units NaN or diverged; c: missing')
        >>> for_every("all", says=q, text="t", quantity="slope", side="<",
        ...           members={"a": [-1.0, -1.02], "b": [-2.0, -2.02]},
        ...           expected=["a", "b", "c"], excluded={"c": "no centre node"}).verdict
        'PASS'
    """
    excluded = dict(excluded or {})
    chosen = [n for n in expected if n not in excluded]
    decided, failed, outside = _decide_members(members, chosen, assumptions or {}, side, margin)
    straddling = {k: d for k, d in decided.items() if d.verdict == "NOT TESTED"}
    failing = {k: d for k, d in decided.items() if d.verdict == "FAIL"}
    verdict: Verdict = "FAIL" if failed else "NOT TESTED" if straddling or not decided else "PASS"
    deciding = _deciding(failing or straddling or decided, side)
    decision = decided[deciding] if deciding else None
    needed = max((d.n_needed for d in straddling.values() if d.n_needed), default=None)
    untested = _every_untested(verdict, deciding, decision, needed, outside, decides)
    if verdict == "FAIL":
        head = [f'the paper says "{says.text}" ({says.where}); we measure {"; ".join(failed)}']
    else:
        head = [f"decided by {deciding}: {decision.describe()}"] if decision else []
    parts = [*head, *outside, note]
    if excluded:
        reasons = ", ".join(f"{k} ({v})" for k, v in excluded.items())
        parts.append(f"excluded by config ({len(excluded)}): {reasons}")
    stated = (id, beyond, text, quantity, side, margin, says)
    return _claim(*stated, decision, verdict == "PASS", parts, untested, needed, decides)


def _claim(
    id: str,
    beyond: bool,
    text: str,
    quantity: str,
    side: Side,
    margin: float,
    says: Quote,
    decision: Decision | None,
    passed: bool,
    notes: Sequence[str],
    untested: str,
    needed: int | None,
    decides: str,
) -> Claim:
    """The `Claim` of a finding decided by `decision` (None: no member decided it), its
    non-empty `notes` joined."""
    return Claim(
        id,
        "beyond" if beyond else "finding",
        text,
        quantity,
        side,
        margin,
        decision.mean if decision else math.nan,
        passed,
        "; ".join(n for n in notes if n),
        says.where,
        says.text,
        untested,
        _finite(decision.low) if decision else None,
        _finite(decision.high) if decision else None,
        decision.n if decision else None,
        needed,
        decides,
    )


def _every_untested(
    verdict: Verdict,
    deciding: str | None,
    decision: Decision | None,
    needed: int | None,
    outside: list[str],
    decides: str,
) -> str:
    """Why a "for every" finding is NOT TESTED: its straddling member, what would decide it;
    or, with no member decided, the assumptions the members break."""
    if verdict != "NOT TESTED":
        return ""
    if decision is not None:
        worst = Decision(
            "NOT TESTED", decision.n, decision.mean, decision.se, needed, decision.reason
        )
        return f"{deciding}: " + _untested(worst, decides)
    every = f"{TOO_SMALL}: every member is excluded by the config"
    return f"{UNMET}: " + "; ".join(outside) if outside else every


def _decide_members(
    members: Mapping[str, Iterable[float | None] | None],
    names: Sequence[str],
    assumptions: Mapping[str, Sequence[Assumption]],
    side: Side,
    margin: float,
) -> tuple[dict[str, Decision], list[str], list[str]]:
    """Each named member by the one rule: (decisions, why each failing or missing member
    fails, why each member outside the assumptions is not tested)."""
    decided: dict[str, Decision] = {}
    failed: list[str] = []
    outside: list[str] = []
    for name in names:
        unmet = _unmet(assumptions.get(name, ()))
        if unmet:
            outside.append(f"{name}: {unmet}")
        elif name not in members:
            failed.append(f"{name}: missing")
        else:
            values = members[name]
            decided[name] = decision = decide([None] if values is None else values, side, margin)
            if decision.verdict == "FAIL":
                failed.append(f"{name}: {decision.reason or decision.describe()}")
    return decided, failed, outside


def _deciding(decisions: Mapping[str, Decision], side: Side) -> str | None:
    """The member whose interval lies nearest the wrong side of the margin: the least lower
    bound for side ">", the greatest upper bound for "<" (a unit-less mean where no spread)."""
    if not decisions:
        return None

    def edge(name: str) -> float:
        d = decisions[name]
        bound = d.mean if math.isnan(d.se) else (d.low if side == ">" else d.high)
        return math.inf if math.isnan(bound) else (bound if side == ">" else -bound)

    return min(decisions, key=edge)


def check(
    id: str,
    text: str,
    quantity: str,
    measured: Any,
    relation: Relation,
    threshold: float | None = None,
    *,
    note: str = "",
) -> Claim:
    """An identity or construction that holds by design (reported apart from findings): an
    exact comparison of one number, no interval; NaN never passes.

    Example:
        >>> check("exact", "parts sum to the output", "max error", 1e-15, "<", 1e-12).verdict
        'PASS'
    """
    if relation == "true":
        value: Any = bool(measured)
        passed = value
    else:
        value = math.nan if measured is None else float(measured)
        passed = (
            not math.isnan(value)
            and {
                "<": value < threshold,
                "<=": value <= threshold,
                ">": value > threshold,
                ">=": value >= threshold,
            }[relation]
        )
    return Claim(id, "check", text, quantity, relation, threshold, value, bool(passed), note)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class Tally:
    """The verdicts of a run's claims, counted once for every reader (the run's last line, the
    report's summary box, `report --index`, `rankcollapse reproduce`): paper findings, beyond
    the papers and checks apart, and the ids that failed or were not tested.

    Example:
        >>> t = Tally.of([("a", "finding", "PASS"), ("b", "beyond", "FAIL"),
        ...               ("c", "check", "PASS"), ("d", "finding", "NOT TESTED")])
        >>> t.text()
        'paper findings: 1 of 2 pass, 1 not tested; beyond the papers: 0 of 1 pass, 1 fail; checks: 1 of 1 hold (failed: b; not tested: d)'
        >>> t.worst
        'FAIL'
    """

    counts: Mapping[Kind, Mapping[Verdict, int]]
    failed: tuple[str, ...] = ()
    untested: tuple[str, ...] = ()

    @classmethod
    def of(cls, claims: Iterable[tuple[str, str, str]]) -> Tally:
        """From (id, kind, verdict) triples: `Claim`s (`tally`) and stored records alike."""
        counts: dict[Kind, dict[Verdict, int]] = {k: dict.fromkeys(VERDICTS, 0) for k in KINDS}
        failed: list[str] = []
        untested: list[str] = []
        for id_, kind, verdict in claims:
            counts[kind][verdict] += 1  # type: ignore[index]
            if verdict == "FAIL":
                failed.append(id_)
            elif verdict == "NOT TESTED":
                untested.append(id_)
        return cls(counts, tuple(failed), tuple(untested))

    @property
    def worst(self) -> Verdict:
        """FAIL if any claim failed (a check too), else NOT TESTED if any was not tested, else
        PASS: the colour of a run wherever it is shown."""
        return "FAIL" if self.failed else ("NOT TESTED" if self.untested else "PASS")

    def text(self) -> str:
        """One line, the same wherever a run's verdicts are summed up."""
        parts = [_counts_text(noun, self.counts[kind]) for kind, noun in NOUNS.items()]
        line = "; ".join(p for p in parts if p) or "no findings or checks stated"
        ids = [f"failed: {', '.join(self.failed)}"] if self.failed else []
        ids += [f"not tested: {', '.join(self.untested)}"] if self.untested else []
        return line + (f" ({'; '.join(ids)})" if ids else "")


KINDS: tuple[Kind, ...] = ("finding", "beyond", "check")
NOUNS: dict[Kind, str] = {
    "finding": "paper findings",
    "beyond": "beyond the papers",
    "check": "checks",
}


def _counts_text(noun: str, counts: Mapping[Verdict, int]) -> str:
    """'paper findings: 3 of 5 pass, 1 fail, 1 not tested' (zeros left out; checks hold)."""
    total = sum(counts.values())
    if not total:
        return ""
    verb = "hold" if noun == "checks" else "pass"
    text = f"{noun}: {counts['PASS']} of {total} {verb}"
    text += f", {counts['FAIL']} fail" if counts["FAIL"] else ""
    return text + (f", {counts['NOT TESTED']} not tested" if counts["NOT TESTED"] else "")


def tally(claims: Iterable[Claim]) -> Tally:
    """The `Tally` of a run's claims."""
    return Tally.of((c.id, c.kind, c.verdict) for c in claims)
