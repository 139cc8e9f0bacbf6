"""`--set KEY=VALUE` with any key and any value: a valid plan or a clear error, never a
traceback (hypothesis searches for a counterexample over every registered experiment)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankcollapse.errors import RankCollapseError
from rankcollapse.experiments import experiment_names, get_experiment
from rankcollapse.runner import parse_overrides, plan

NAMES = experiment_names()
SCALARS = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(alphabet="abcxyz_-:.0123456789", max_size=8),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=5)


def _text(value: object) -> str:
    """The value as a user would type it after '=' (YAML flow style)."""
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@st.composite
def overrides(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(NAMES))
    fields = list(get_experiment(name).config.model_fields)
    key = draw(st.one_of(st.sampled_from(fields), st.text("abcdefgh_.", min_size=1, max_size=10)))
    return name, f"{key}={_text(draw(VALUES))}"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(overrides())
def test_any_override_gives_a_config_or_a_clear_error(case: tuple[str, str]) -> None:
    name, pair = case
    try:
        planned = plan(name, "quick", parse_overrides([pair]))
    except RankCollapseError:
        return
    assert planned.units, f"{name} --set {pair} planned no units"
