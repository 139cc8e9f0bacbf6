"""Devices and dtypes are parsed once, by `rankcollapse.devices`, into torch types; config
fields typed `Device` / `Dtype` dump back as names; the runner records what the config holds."""

import importlib

import pytest
import torch
from pydantic import BaseModel

from rankcollapse.devices import Device, Dtype, parse_device, resolve_device, resolve_dtype
from rankcollapse.errors import ConfigError

devices = importlib.import_module("rankcollapse.devices")


class Config(BaseModel):
    device: Device = torch.device("cpu")
    dtype: Dtype = torch.float32


def test_config_fields_hold_torch_types_and_dump_their_names():
    config = Config(device="cpu", dtype="bfloat16")
    assert config.device == torch.device("cpu") and config.dtype == torch.bfloat16
    assert config.model_dump(mode="json") == {"device": "cpu", "dtype": "bfloat16"}
    assert Config.model_validate(config.model_dump()) == config


def test_auto_picks_mps_when_it_is_the_accelerator_and_the_runner_records_it(monkeypatch):
    monkeypatch.setattr(devices, "_available", lambda kind: kind in ("mps", "cpu"))
    config = Config(device="auto")
    assert config.device == torch.device("mps")
    backends = importlib.import_module("rankcollapse.runner.backends")
    assert backends._device(config) == "mps"  # it said "cpu" on an MPS machine


def test_a_stored_config_naming_an_absent_accelerator_still_reads_back():
    assert Config(device="cuda").device == torch.device("cuda")  # a report on a CPU machine
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="'cuda' is not available on this machine"):
            resolve_device("cuda")


def test_bad_names_are_clear_errors():
    with pytest.raises(ConfigError, match="device 'tpu' is unknown; use one of auto, cpu"):
        parse_device("tpu")
    with pytest.raises(ValueError, match="dtype 'int8' is unknown"):
        Config(dtype="int8")
    assert resolve_dtype("float64", float64=True) == torch.float64
    with pytest.raises(ConfigError, match="dtype 'float64' is unknown"):
        resolve_dtype("float64")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("cuda:x", "device 'cuda:x' is malformed; write e.g. 'cuda:0'"),
        ("cpu:0", "device 'cpu:0' is malformed; write 'cpu' alone"),
        ("gpu:1", "device 'gpu:1' is unknown; use one of auto, cpu, cuda, cuda:N, mps"),
    ],
)
def test_device_names_have_one_grammar(name, message):
    assert [devices.device_name(n) for n in ("auto", "cuda:3", "mps")] == ["auto", "cuda:3", "mps"]
    with pytest.raises(ConfigError, match=message):
        parse_device(name)
    with pytest.raises(ValueError, match=message):
        Config(device=name)


@pytest.fixture
def one_gpu(monkeypatch):
    """A machine with one CUDA device (cuda:0) visible."""
    monkeypatch.setattr(devices, "_available", lambda kind: kind in ("cuda", "cpu"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


NOT_HERE = r"device 'cuda:1' is not visible here: this machine shows 1 cuda device\(s\) \(cuda:0\)"


def test_cuda_n_is_taken_on_every_route_and_refused_where_not_visible(one_gpu, tmp_path, capsys):
    from rankcollapse.cli import main
    from rankcollapse.experiments import get_experiment
    from rankcollapse.measure import probe

    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    assert Config(device="cuda:1").device == torch.device("cuda", 1)  # a stored config reads back
    with pytest.raises(ConfigError, match=NOT_HERE):
        probe("bert-base", init="random", random_tokens=True, device="cuda:1")
    with pytest.raises(ConfigError, match=NOT_HERE):
        get_experiment("wu2024-geometry").make_config(
            "quick", {"device": "cuda:1"}, devices_here=True
        )
    out = tmp_path / "probe"
    argv = ["probe", "bert-base", "--init", "random", "--random-tokens", "--out", str(out)]
    assert main([*argv, "--device", "cuda:1"]) == 2
    assert "is not visible here" in " ".join(capsys.readouterr().err.split())
    assert not out.exists()
