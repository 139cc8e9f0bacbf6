import math

import pandas as pd
import pytest

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.dong2021_path_lengths import run_unit, shape_labels, summarize, units

EXP = get_experiment("dong2021-path-lengths")


def _run(config):
    return pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)


def test_rows_count_every_length_of_every_architecture():
    config = EXP.make_config("quick")
    results = _run(config)
    bert = results[(results["architecture"] == "bert-base") & (results["metric"] == "n_paths")]
    assert bert["value"].tolist() == [float(math.comb(12, k) * 12**k) for k in range(13)]
    assert list(results.columns[:4]) == ["architecture", "n_layers", "n_heads", "length"]


def test_checks_pass_and_the_figure_is_made():
    config = EXP.make_config("quick")
    summary = summarize(config, _run(config))
    assert {c.id: (c.kind, c.passed) for c in summary.claims} == {
        "bert-base-long-paths": ("check", True),
        "most-paths-are-long": ("check", True),
    }
    assert not summary.findings
    assert "path length distribution" in summary.figures


def test_checks_read_the_counts():
    config = EXP.make_config("quick")
    by_id = {c.id: c for c in summarize(config, _run(config)).claims}
    shares = [math.comb(12, k) * 12**k / 13**12 for k in range(10, 13)]
    assert by_id["bert-base-long-paths"].measured == pytest.approx(sum(shares))
    assert by_id["most-paths-are-long"].measured == pytest.approx(27 / 30)  # llama-small
    assert "distilbert: k=6 of L=6" in by_id["most-paths-are-long"].note


def test_architectures_of_one_shape_share_one_label():
    config = EXP.make_config("quick")
    share = _run(config).query("metric == 'share'")
    labels = set(shape_labels(share))
    assert "bert-base = gpt2 (L=12, H=12)" in labels and len(labels) == 4


def test_a_typo_in_an_architecture_fails_with_the_config_naming_the_known_ones():
    with pytest.raises(
        ConfigError, match="unknown architecture 'bert-bse'.*Did you mean 'bert-base'"
    ):
        EXP.make_config("quick", {"architectures": ["bert-bse"]})
    with pytest.raises(ConfigError, match="architecture"):
        EXP.make_config("quick", {"architecture": ["bert-base"]})
