"""The config the Wu curve experiments share: masks, device and dtype parsed once into types,
written back as the strings they were given as."""

import pytest
import torch
from pydantic import ValidationError

from rankcollapse.experiments._curves import CurvesConfig
from rankcollapse.masks import MaskSpec


def test_a_bad_mask_spec_fails_the_config():
    with pytest.raises(ValidationError, match="windw.*Did you mean 'window'"):
        CurvesConfig(masks=["windw:1"])


def test_masks_device_and_dtype_become_types_and_dump_back_as_strings():
    config = CurvesConfig(masks=["window:01", "causal"], device="cpu", dtype="bfloat16")
    assert config.masks == [MaskSpec("window", (1,)), MaskSpec("causal")]
    assert config.device == torch.device("cpu") and config.dtype == torch.bfloat16
    dumped = config.model_dump(mode="json")
    assert dumped["masks"] == ["window:1", "causal"]
    assert (dumped["device"], dumped["dtype"]) == ("cpu", "bfloat16")
    assert CurvesConfig.model_validate(dumped) == config


def test_real_models_run_in_the_config_dtype_unless_listed_in_float64_models():
    config = CurvesConfig(dtype="bfloat16", float64_models=["smollm2"])
    assert config.model_dtype("minilm") == torch.bfloat16
    assert config.model_dtype("smollm2") == torch.float64
    assert CurvesConfig().dtype == torch.float32
    with pytest.raises(ValidationError, match="dtype 'float64' is unknown"):
        CurvesConfig(dtype="float64")


def test_wu_variants_are_typed_end_to_end_and_rows_name_them_within_the_set():
    from rankcollapse.experiments.wu2024_masks import Config
    from rankcollapse.masks import parse_mask_spec
    from rankcollapse.measure import toy_curves
    from rankcollapse.variants import VARIANTS

    config = Config(variants=["san", "wu:san+ln"])
    assert config.variants == [VARIANTS["wu:san"], VARIANTS["wu:san+ln"]]
    assert config.model_dump(mode="json")["variants"] == ["san", "san+ln"]
    frame = toy_curves(
        config.variants,
        parse_mask_spec("causal"),
        n_layers=2,
        d_model=4,
        n_tokens=3,
        n_samples=1,
        seed=0,
    )
    assert list(frame["variant"].unique()) == ["san", "san+ln"]


def test_curve_experiments_take_any_text_model_of_the_registry():
    from rankcollapse.experiments.wu2024_masks import Config
    from rankcollapse.experiments.wu2024_temperature import Config as TemperatureConfig

    assert Config(models=["toy", "bert-deep", "gpt2"]).models == ["toy", "bert-deep", "gpt2"]
    assert TemperatureConfig(models=["toy", "pythia-160m"]).models == ["toy", "pythia-160m"]
    with pytest.raises(ValidationError, match="unknown model 'vit-base'"):
        TemperatureConfig(models=["vit-base"])


@pytest.mark.parametrize("name", ["wu2024-masks", "wu2024-temperature", "dong2021-rank-collapse"])
def test_a_text_file_is_checked_when_the_config_is_made_and_dumps_back_as_its_path(name, tmp_path):
    from rankcollapse.errors import ConfigError
    from rankcollapse.experiments import get_experiment

    exp = get_experiment(name)
    with pytest.raises(ConfigError, match=r"text: Path does not point to a file \(got '/no/such"):
        exp.make_config("quick", {"text": "/no/such/file.txt"})
    text = tmp_path / "words.txt"
    text.write_text("real words " * 100)
    config = exp.make_config("quick", {"text": str(text)})
    assert config.text == text and config.model_dump(mode="json")["text"] == str(text)
    assert exp.make_config("quick").text is None  # the built-in corpus
