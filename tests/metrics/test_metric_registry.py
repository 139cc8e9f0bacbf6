"""The registry reads formula and reference from the docstrings; the CLI lists it."""

import pytest

from rankcollapse.cli import main
from rankcollapse.metrics import DEFAULT_METRICS, METRICS, get_metric
from rankcollapse.metrics.registry import docstring_field


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_has_its_formula_and_reference_from_its_docstring(name):
    info = get_metric(name)
    assert info.name == info.fn.__name__ == name
    assert info.kind in ("states", "attention")
    assert info.formula and info.formula in " ".join(info.fn.__doc__.split())
    assert info.reference and info.reference in " ".join(info.fn.__doc__.split())
    assert "\n" not in info.formula + info.reference


def test_default_metrics_are_all_state_metrics():
    assert set(DEFAULT_METRICS) == {n for n, info in METRICS.items() if info.kind == "states"}
    assert len(DEFAULT_METRICS) == 12


def test_formula_continuation_lines_are_joined():
    assert docstring_field(METRICS["res_comp_rel"].fn, "Formula").endswith(
        "||A||_{1,inf} = sqrt(||A||_1 ||A||_inf)."
    )


def test_missing_docstring_field_is_a_clear_error():
    def undocumented(x):
        """No formula here."""

    with pytest.raises(LookupError, match="undocumented has no 'Formula:' line"):
        docstring_field(undocumented, "Formula")


def test_metrics_command_lists_every_metric(capsys):
    assert main(["metrics"]) == 0
    shown = capsys.readouterr().out
    for name in METRICS:
        assert name in shown


def test_metrics_command_filters_by_kind(capsys):
    assert main(["metrics", "--kind", "attention"]) == 0
    shown = capsys.readouterr().out
    assert "attn_min_edge" in shown and "res_comp_rel" not in shown


def test_metrics_command_says_which_metrics_can_be_at_the_floor(capsys):
    assert main(["metrics", "--kind", "states"]) == 0
    rows = {
        line.split("│")[1].strip(): line
        for line in capsys.readouterr().out.splitlines()
        if line.count("│") > 3 and line.split("│")[1].strip() in METRICS
    }
    assert "yes" in rows["mu_rel"] and "never" in rows["cos_mean"]
