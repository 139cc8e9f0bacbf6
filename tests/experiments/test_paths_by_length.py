import pandas as pd
import pytest
import torch

from rankcollapse.errors import ConfigError
from rankcollapse.experiments import get_experiment
from rankcollapse.experiments.paths_by_length import run_unit, summarize, units

EXP = get_experiment("paths-by-length")
TINY = {
    "toy_layers": 3,
    "toy_heads": 2,
    "toy_width": 8,
    "n_tokens": 5,
    "n_samples": 2,
    "n_paths": 3,
    "models": [],
}


def _run(config):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return pd.concat([run_unit(config, u) for u in units(config)], ignore_index=True)
    finally:
        torch.set_num_threads(threads)


def test_toy_units_are_exact_and_pure_san_lives_at_length_l():
    config = EXP.make_config("quick", TINY)
    results = _run(config)
    claims = {c.id: c for c in summarize(config, results).claims}
    assert claims["toy-decomposition-exact"].passed
    assert claims["pure-san-single-length"].passed
    assert "real-decomposition-exact" not in claims
    shares = results[results["metric"] == "share"].groupby(["model", "sample"])["value"].sum()
    assert shares.to_numpy() == pytest.approx(1.0, abs=1e-12)


def test_real_model_names_become_units_with_their_init():
    config = EXP.make_config("quick", {"models": ["minilm:random", "smollm2"]})
    reals = [u for u in units(config) if not u["model"].startswith("toy-")]
    assert reals == [
        {"model": "minilm", "init": "random", "seed": 0},
        {"model": "smollm2", "init": "pretrained", "seed": 0},
    ]


@pytest.mark.slow
def test_pretrained_minilm_decomposes_exactly():
    config = EXP.make_config("quick", {**TINY, "toy_variants": [], "models": ["minilm:pretrained"]})
    results = _run(config)
    error = results.loc[results["metric"] == "exact_error", "value"]
    assert error.max() < 1e-12


def test_a_model_outside_the_bert_and_llama_families_is_refused_before_any_work():
    with pytest.raises(ConfigError, match="'gpt2' cannot be decomposed.*minilm"):
        EXP.make_config("quick", {"models": ["gpt2:random"]})
    with pytest.raises(ConfigError, match="must be pretrained or random"):
        EXP.make_config("quick", {"models": ["minilm:trained"]})
