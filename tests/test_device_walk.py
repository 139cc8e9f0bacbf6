"""A device is parsed once and checked visible once on every path (docs/architecture.md,
"Parameter walks"): the command line and `probe` / `load_model` resolve it at their boundary,
a run's config at `Experiment.make_config`; everything below takes the `torch.device`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from rankcollapse import devices
from rankcollapse.cli import main
from rankcollapse.experiments import get_experiment
from rankcollapse.hf import load_model, load_resolved, tiny_model
from rankcollapse.measure import probe

SRC = Path(__file__).resolve().parents[1] / "src" / "rankcollapse"
SMALL = ["--n-samples", "2", "--n-tokens", "4", "--metrics", "res_comp_rel"]
# The boundaries, the only callers of a visibility check (the command line's modules too).
BOUNDARIES = {
    "devices.py:resolve_device",
    "hf/models.py:load_model",
    "hf/models.py:as_loaded",  # a Python call given a name (`qk_ranks`): load_model's check
    "measure/probe.py:probe",
    "measure/activations.py:measure_file",  # a Python call given a device name, as `probe`
    "experiments/_registry.py:_check_devices_visible",
}
CHECKS = {"resolve_device", "check_visible", "load_model"}


@pytest.fixture
def checks(monkeypatch):
    """Every visibility check made, in order (the device each one checked)."""
    seen: list[str] = []
    real = devices.check_visible

    def counted(device):
        seen.append(str(device))
        return real(device)

    monkeypatch.setattr(devices, "check_visible", counted)
    return seen


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models") / "gpt"
    tiny_model("gpt2").save_pretrained(folder)
    return folder


def test_the_probe_command_checks_its_device_once(checks, gpt, tmp_path):
    out = tmp_path / "probe"
    assert main(["probe", str(gpt), "--random-tokens", *SMALL, "--out", str(out)]) == 0
    assert checks == ["cpu"]


def test_the_probe_command_refuses_an_invisible_device_before_its_folder(
    monkeypatch, gpt, tmp_path, capsys
):
    real = devices._available
    monkeypatch.setattr(devices, "_available", lambda kind: kind != "cuda" and real(kind))
    out = tmp_path / "probe"
    code = main(["probe", str(gpt), "--random-tokens", "--device", "cuda", *SMALL, "--out",
                 str(out)])  # fmt: skip
    assert code == 2 and "device 'cuda' is not available" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    "command",
    [["qk-rank", "{gpt}"], ["paths", "decompose", "--model", "{gpt}", "--n-samples", "2"]],
)
def test_other_commands_refuse_an_invisible_device_before_their_folder(
    command, monkeypatch, gpt, tmp_path, capsys
):
    real = devices._available
    monkeypatch.setattr(devices, "_available", lambda kind: kind != "cuda" and real(kind))
    out = tmp_path / "out"
    argv = [part.format(gpt=gpt) for part in command]
    assert main([*argv, "--device", "cuda", "--out", str(out)]) == 2
    assert "device 'cuda' is not available" in capsys.readouterr().err
    assert not out.exists()


def test_python_probe_and_load_model_check_once_at_their_boundary(checks, gpt):
    frame = probe(str(gpt), random_tokens=True, n_samples=2, n_tokens=4,
                  metrics=["res_comp_rel"], device="cpu")  # fmt: skip
    assert checks == ["cpu"] and frame["layer"].nunique() == 3
    probe(tiny_model("gpt2"), random_tokens=True, n_samples=2, n_tokens=4,
          metrics=["res_comp_rel"])  # fmt: skip
    assert checks == ["cpu"]  # a model in memory stays where it is: nothing to check
    load_model(str(gpt), init="random")
    assert checks == ["cpu", "cpu"]
    loaded = load_resolved(str(gpt), init="random", device=torch.device("cpu"))
    assert checks == ["cpu", "cpu"] and loaded.n_layers == 2


def test_a_run_config_checks_its_device_once(checks):
    """`run X --set device=...`, a YAML file's `device:` and `run_experiment(overrides=)` all
    reach `make_config` (the runner's `plan`); a stored config is read back unchecked."""
    exp = get_experiment("wu2024-geometry")
    config = exp.make_config("quick", {"device": "cpu"}, devices_here=True)
    assert checks == ["cpu"] and config.device == torch.device("cpu")
    exp.make_config("quick", {"device": "cpu"})
    assert checks == ["cpu"]


def _checks_outside_boundaries(root: Path) -> list[str]:
    """'module.py:function' for every call of a visibility check outside BOUNDARIES and
    outside the command line's modules."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        if module.startswith("cli/"):
            continue
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for call in ast.walk(fn):
                name = getattr(getattr(call, "func", None), "id", None)
                name = name or getattr(getattr(call, "func", None), "attr", None)
                where = f"{module}:{fn.name}"
                if isinstance(call, ast.Call) and name in CHECKS and where not in BOUNDARIES:
                    found.append(f"{where} calls {name}")
    return found


def test_inner_code_takes_a_resolved_device_and_checks_no_more():
    assert _checks_outside_boundaries(SRC) == []


def test_the_walk_finds_a_check_below_the_boundary(tmp_path):
    (tmp_path / "inner.py").write_text("def train(d):\n    return resolve_device(d)\n")
    assert _checks_outside_boundaries(tmp_path) == ["inner.py:train calls resolve_device"]
