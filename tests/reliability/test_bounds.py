"""Bounded resources: one bound per size wherever it enters, sizes checked against the memory
they would take before anything is allocated, `--jobs` capped by cores and memory, and
`measure` reading one layer at a time."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

from rankcollapse.cli import main
from rankcollapse.errors import ConfigError
from rankcollapse.experiments import _registry, get_experiment
from rankcollapse.measure import ProbeInputs, probe
from rankcollapse.nets import NetConfig
from rankcollapse.sizes import SIZES, check_int, check_size

TOY = ["--n-samples", "2", "--n-tokens", "4", "--no-figures"]


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--n-layers", "1000000", "--no-figures"],
        ["simulate", "--n-samples", "1000000000", "--no-figures"],
        ["simulate", "--d-model", "1000000000", "--no-figures"],
        ["paths", "decompose", "--n-layers", "1000000"],
        ["probe", "minilm", "--n-samples", "1000000000", "--no-figures"],
    ],
    ids=[
        "simulate-n-layers",
        "simulate-n-samples",
        "simulate-d-model",
        "decompose-n-layers",
        "probe-n-samples",
    ],
)
def test_a_size_too_big_for_memory_is_refused_naming_it_and_the_memory(argv, tmp_path, capsys):
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: ") and "needs about" in err and "Nothing was allocated" in err
    size = next(v for v in argv if v.isdigit() and len(v) > 6)
    assert f"{int(size):,}" in err
    assert not (tmp_path / "out").exists()


def test_the_memory_refusal_of_paths_names_every_flag_that_sets_its_size(tmp_path, capsys):
    argv = ["paths", "products", "--n-tokens", "16384", "--n-samples", "65536"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    fix = err[err.index("; lower ") :]  # it named --n-layers, --n-samples and --d-model only
    flags = ("--n-tokens", "--n-samples", "--n-layers", "--n-heads", "--d-model")
    assert "needs about" in err and all(flag in fix for flag in flags), err


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--n-layers", "1000000", "--no-figures"],
        ["paths", "decompose", "--n-layers", "1000000"],
    ],
    ids=["simulate", "paths-decompose"],
)
def test_a_refused_size_peaks_under_1_gb(argv, tmp_path):
    # a fresh parent whose one child is the command: its RUSAGE_CHILDREN peak is that command's
    # alone (this test process's own children, earlier tests' commands, would mix in)
    parent = (
        "import resource, subprocess, sys; d = subprocess.run(sys.argv[1:], capture_output=True, "
        "text=True); sys.stderr.write(d.stderr); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(d.returncode)"
    )
    done = subprocess.run(
        [sys.executable, "-c", parent, sys.executable, "-m", "rankcollapse.cli", *argv,
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "needs about" in done.stderr, done.stderr
    peak_kb = int(done.stdout.split()[-1])
    assert 0 < peak_kb < 1_000_000, f"peak {peak_kb} KB"


@pytest.mark.parametrize(
    ("call", "size"),
    [
        (lambda: ProbeInputs(n_samples=10**9), "n_samples is 1000000000"),
        (lambda: ProbeInputs(n_tokens=10**9), "n_tokens is 1000000000"),
        (lambda: probe("minilm", n_samples=10**9, n_tokens=128), "n_samples is 1000000000"),
        (lambda: probe("minilm", batch_size=10**9), "batch_size is 1000000000"),
    ],
    ids=["inputs-n-samples", "inputs-n-tokens", "probe-n-samples", "probe-batch-size"],
)
def test_a_python_size_beyond_its_bound_is_refused_fast_naming_the_bound(call, size):
    start = time.perf_counter()
    with pytest.raises(ConfigError) as refused:
        call()
    assert time.perf_counter() - start < 5  # before any model loads or tensor is made
    message = str(refused.value)
    name = size.split()[0]
    assert message.startswith(size) and f"at most {SIZES[name].high}" in message
    if name != "batch_size":  # the token ids alone: 8 bytes x 10^9 x 128 (or x 32)
        assert "it would need about" in message and "GB of memory" in message


def test_a_python_size_within_its_bound_but_not_memory_is_refused(monkeypatch):
    import rankcollapse.process

    monkeypatch.setattr(rankcollapse.process, "available_memory", lambda: 10**6)
    with pytest.raises(ConfigError, match=r"probe inputs with n_samples=65,536.*needs about"):
        ProbeInputs(n_samples=65536, n_tokens=16)


def test_one_bound_per_size_wherever_it_enters(capsys, monkeypatch):
    high = SIZES["n_layers"].high
    assert main(["simulate", "--n-layers", str(high + 1), *TOY]) == 2
    assert f"less than or equal to {high}" in capsys.readouterr().err
    assert main(["run", "toy-collapse", "--set", f"n_layers={high + 1}", "--dry-run"]) == 2
    assert f"less than or equal to {high}" in capsys.readouterr().err
    assert main(["paths", "decompose", "--n-layers", str(high + 1)]) == 2
    assert f"at most {high}" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=f"less than or equal to {high}"):
        NetConfig(n_layers=high + 1)
    with pytest.raises(ConfigError, match=f"at most {high}"):
        check_size("n_layers", high + 1)
    config = get_experiment("toy-collapse").config
    schema = config.model_json_schema()["properties"]["n_layers"]
    assert (schema["minimum"], schema["maximum"]) == (SIZES["n_layers"].low, SIZES["n_layers"].high)
    assert NetConfig(n_layers=1).n_layers == 1  # the low end is the same everywhere too
    assert config(n_layers=1).n_layers == 1


def test_the_bounds_are_said_in_the_help(capsys):
    for argv in (["simulate", "--help"], ["run", "toy-collapse", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = " ".join(capsys.readouterr().out.split())
        assert f"{SIZES['n_layers'].low}..{SIZES['n_layers'].high}" in out, argv


def test_scalar_checks_live_in_one_place():
    from rankcollapse.masks import families, spec

    assert families.check_int is check_int and spec.check_int is check_int
    with pytest.raises(ConfigError, match="from 1 to 3"):
        check_int("w", 4, low=1, high=3, what="a width")


def test_jobs_beyond_the_machine_are_capped_and_said(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    argv = ["run", "tiny", "--set", "items=1", f"log_dir={tmp_path}", "--jobs", "10000",
            "--no-figures", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "--jobs 10000 capped to" in err and "per worker" in err


def _npy_header(shape: tuple[int, ...]) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return header.getvalue()


def test_a_64_gib_sparse_npy_is_refused_before_a_layer_is_read(tmp_path, capsys):
    path = tmp_path / "huge.npy"
    shape = (16, 64, 4096, 4096)  # 64 GiB of float32, a layer of 4 GiB
    header = _npy_header(shape)
    path.write_bytes(header)
    os.truncate(path, len(header) + int(np.prod(shape)) * 4)  # sparse: no disk used
    assert main(["measure", str(path), "--no-figures", "--out", str(tmp_path / "o")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "measuring one layer" in err and "n_samples=64" in err and "needs about" in err


def test_measure_reads_one_layer_at_a_time(tmp_path, monkeypatch):
    from rankcollapse.reading import load_activations

    rng = np.random.default_rng(0)
    states = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)
    np.save(tmp_path / "acts.npy", states)
    layers = load_activations(tmp_path / "acts.npy")["states"]
    assert layers.shape == (3, 2, 4, 5) and len(layers) == 3
    assert np.array_equal(layers.read(2).numpy(), states[2])
    read = []
    real = np.fromfile
    monkeypatch.setattr(np, "fromfile", lambda *a, **k: read.append(k["count"]) or real(*a, **k))
    assert main(["measure", str(tmp_path / "acts.npy"), "--no-figures", "--out",
                 str(tmp_path / "o")]) == 0  # fmt: skip
    assert read == [2 * 4 * 5] * 3  # three reads of one layer each, never the whole file


def test_a_size_below_its_bound_is_refused_without_a_memory_estimate():
    with pytest.raises(ConfigError) as refused:
        probe("minilm", n_tokens=1)
    message = str(refused.value)
    assert message.startswith("n_tokens is 1; it must be at least 2")
    assert "memory" not in message  # a size too small says nothing of memory
