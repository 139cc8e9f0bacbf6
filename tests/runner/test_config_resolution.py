"""One resolution of a config (`Experiment.make_config`) for every way values come in: CLI
`--set`, a YAML file, a Python dict and a stored run's config.yaml; devices are checked there,
before any folder is claimed or file written."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_experiment import TINY

from rankcollapse import devices
from rankcollapse.cli import main
from rankcollapse.errors import ConfigError
from rankcollapse.experiments import _registry
from rankcollapse.report import DamagedFileError, read_config
from rankcollapse.runner import load_config_file, parse_overrides, plan, run_experiment


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    return TINY


def test_set_a_yaml_file_a_dict_and_a_stored_run_resolve_to_one_config(tiny, tmp_path):
    (tmp_path / "c.yaml").write_text("items: 2\nnet:\n  depth: 5\n")
    from_set = plan("tiny", "quick", parse_overrides(["items=2", "net.depth=5"])).config
    from_file = plan("tiny", "quick", config_file=tmp_path / "c.yaml").config
    from_dict = plan("tiny", "quick", {"items": 2, "net": {"depth": 5}}).config
    run_experiment(tiny, overrides={"items": 2, "net.depth": 5, "log_dir": str(tmp_path)},
                   out=tmp_path / "run")  # fmt: skip
    stored = read_config(tmp_path / "run", tiny)
    assert from_set == from_file == from_dict == stored.model_copy(update={"log_dir": ""})
    assert from_set.net.depth == 5 and from_set.items == 2


def test_set_overrides_the_yaml_file_key_by_key(tiny, tmp_path):
    (tmp_path / "c.yaml").write_text("items: 2\nnet:\n  depth: 5\n  norm: ln\n")
    config = plan("tiny", "quick", {"net.depth": 7}, tmp_path / "c.yaml").config
    assert (config.items, config.net.depth, config.net.norm) == (2, 7, "ln")


def test_a_bad_key_reads_the_same_from_every_source(tiny, tmp_path):
    (tmp_path / "c.yaml").write_text("net:\n  dept: 5\n")
    says = "tiny has no config key 'net.dept'. Did you mean 'net.depth'?"
    with pytest.raises(ConfigError, match=says):
        plan("tiny", "quick", parse_overrides(["net.dept=5"]))
    with pytest.raises(ConfigError, match=says):
        plan("tiny", "quick", config_file=tmp_path / "c.yaml")
    run_experiment(tiny, overrides={"log_dir": str(tmp_path)}, out=tmp_path / "run")
    (tmp_path / "run" / "config.yaml").write_text(
        (tmp_path / "run" / "config.yaml").read_text().replace("depth:", "dept:")
    )
    with pytest.raises(DamagedFileError, match=f"config.yaml is damaged \\({says}"):
        read_config(tmp_path / "run", tiny)
    assert load_config_file(tmp_path / "c.yaml") == {"net": {"dept": 5}}


@pytest.fixture
def no_cuda(monkeypatch):
    """This machine as one without CUDA (whatever it has)."""
    real = devices._available
    monkeypatch.setattr(devices, "_available", lambda kind: kind != "cuda" and real(kind))


def test_an_invisible_device_fails_before_any_folder_is_claimed(no_cuda, tmp_path, capsys):
    out = tmp_path / "geometry"
    code = main(["run", "wu2024-geometry", "--set", "device=cuda", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "wu2024-geometry: device: device 'cuda' is not available on this machine" in err
    assert not out.exists()  # no folder claimed, no config.yaml, no manifest.json
    default_root = tmp_path / "results"
    assert main(["run", "wu2024-geometry", "--set", "device=cuda", "--out", str(default_root),
                 "--dry-run"]) == 2  # fmt: skip
    assert not default_root.exists()


def test_a_stored_config_naming_an_invisible_device_still_reads(no_cuda, tmp_path):
    exp = _registry.get_experiment("wu2024-geometry")
    config = exp.make_config("quick", {"device": "cuda"})  # a stored run's, read back
    assert config.device == torch.device("cuda")
    with pytest.raises(ConfigError, match="device: device 'cuda' is not available"):
        exp.make_config("quick", {"device": "cuda"}, devices_here=True)
