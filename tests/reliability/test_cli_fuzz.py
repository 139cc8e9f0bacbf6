"""Hypothesis over the flags of every command: each drawn command line ends in exit code 0, or
in exit code 2 with one `error:` line; never a traceback.

The flags and their kinds (int, float, choice, path, text, switch) are read from the parser
itself, so a new flag is fuzzed without a change here. Each command starts from a small valid
command line (tiny sizes, a saved tiny model, the test experiment), and hypothesis replaces or
adds one to three flags with hostile values: zero, negative and beyond-64-bit integers,
inf and NaN, unknown choices, missing files, folders, model folders, addresses. `--out` (a fresh
folder per case here) is left to the output-folder tests, and text with markup in it to the
printed-text tests; `--jobs` above 1 and `--dry-run` start worker processes (seconds each),
so --jobs is drawn only as values that must fail or 1.

A second fuzzer covers `plot-training` (monitor logs, metrics and hostile --out values: a
file, a path under a file, /dev/null, a name too long) and the size flags of simulate, probe
and paths with sizes far beyond memory (10^8, 10^9): each is refused before it is allocated.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankcollapse import cli
from rankcollapse.experiments import _registry
from rankcollapse.hf import tiny_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from tiny_experiment import TINY

INTS = ["-18446744073709551617", "-1", "0", "1", "2", "3", "18446744073709551617", "1e3", "x"]
FLOATS = ["inf", "-inf", "nan", "0", "-1", "0.5", "2", "1e308", "1e-320", "x"]
TEXT = ["", "a,b", ",", "window:-1", "random:2:0", "nope", "causal", "san", "x" * 300]
SKIPPED = {"--out", "--dry-run", "--help", "--version"}


def leaf_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command's own parser, by its words: 'probe', 'paths count', ..."""
    found = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and words:
            found[" ".join(words)] = parser
        for action in subs:
            for name, sub in action.choices.items():
                walk(sub, (*words, name))

    walk(cli.build_parser(), ())
    return found


PARSERS = leaf_parsers()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fuzz-inputs")
    rng = np.random.default_rng(0)
    np.save(folder / "states.npy", rng.standard_normal((2, 2, 4, 3)))
    np.save(folder / "mask.npy", np.ones((2, 4), dtype=bool))
    tiny_model("bert").save_pretrained(folder / "tiny-bert")
    (folder / "notes.txt").write_text("Attention is all you need. " * 20)
    (folder / "empty").mkdir()
    (folder / "log").mkdir()
    (folder / "not-a-log.csv").write_text("a,b\n1,2\n")
    _monitor_log(folder / "collapse.csv")
    return {
        "states": folder / "states.npy",
        "mask": folder / "mask.npy",
        "model": folder / "tiny-bert",
        "text": folder / "notes.txt",
        "empty": folder / "empty",
        "log": folder / "log",
        "missing": folder / "missing",
        "collapse": folder / "collapse.csv",
        "not-a-log": folder / "not-a-log.csv",
    }


def _monitor_log(path: Path) -> None:
    from rankcollapse.measure.monitor import CsvLog, watch
    from rankcollapse.nets import NetConfig, ToyNet, random_tokens

    net = ToyNet(NetConfig(n_layers=2, d_model=8))
    monitor = watch(net, blocks="blocks", inputs=random_tokens(2, 5, 8, seed=0), every=1,
                    logs=[CsvLog(path)])  # fmt: skip
    for step in range(2):
        monitor.step(step)


def base_argv(command: str, inputs: dict[str, Path]) -> list[str]:
    """A small valid command line: every case starts from it."""
    model, tiny = str(inputs["model"]), ["--n-samples", "2", "--n-tokens", "4"]
    toy = ["--n-layers", "2", "--n-heads", "1", "--d-model", "4", *tiny]
    return {
        "simulate": toy,
        "measure": [str(inputs["states"])],
        "run": ["tiny", "--set", f"log_dir={inputs['log']}"],
        "report": [str(inputs["empty"])],
        "probe": [model, "--random-tokens", *tiny],
        "paths count": ["--n-layers", "2", "--n-heads", "2"],
        "paths decompose": toy,
        "paths products": [*toy, "--n-paths", "3"],
        "qk-rank": [model, "--init", "random"],
        "reproduce": ["--results", str(inputs["empty"])],
        "compare": [str(inputs["empty"])],
    }.get(command, [])


def values(action: argparse.Action, inputs: dict[str, Path]) -> st.SearchStrategy[list[str]]:
    """Hostile values for one flag, by its kind."""
    if action.nargs == 0:
        return st.just([])
    if action.choices:
        return st.sampled_from([*map(str, action.choices), "nope"]).map(lambda v: [v])
    if action.type is int:
        pool = INTS if "jobs" not in action.dest else ["-1", "0", "1", "18446744073709551617"]
        return st.sampled_from(pool).map(lambda v: [v])
    if action.type is float:
        return st.sampled_from(FLOATS).map(lambda v: [v])
    if action.type is Path or action.dest in ("model", "address"):
        pool = [*map(str, inputs.values()), "/dev/null", "127.0.0.1:1", "not an address", "minilm"]
        return st.sampled_from(pool).map(lambda v: [v])
    if action.dest == "overrides":
        keys = ["items", "seeds", "net.depth", "net", "nope"]
        pairs = [f"{k}={v}" for k in keys for v in ("-1", "[-1]", "[18446744073709551617]", "0")]
        return st.sampled_from(pairs).map(lambda v: [v])
    return st.sampled_from(TEXT).map(lambda v: [v])


def fuzzable(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        a for a in parser._actions
        if a.option_strings and a.help != argparse.SUPPRESS
        and not SKIPPED.intersection(a.option_strings)
    ]  # fmt: skip


@st.composite
def command_lines(draw: st.DrawFn, inputs: dict[str, Path]) -> list[str]:
    command = draw(st.sampled_from(sorted(PARSERS)))
    actions = fuzzable(PARSERS[command])
    argv = [*command.split(), *base_argv(command, inputs)]
    if actions:
        for action in draw(st.lists(st.sampled_from(actions), min_size=1, max_size=3)):
            argv += [draw(st.sampled_from(action.option_strings)), *draw(values(action, inputs))]
    return argv


def run_cli(argv: list[str], folder: Path) -> tuple[int, str]:
    """(exit code, what was printed) of `rankcollapse ARGV` run here, in `folder`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code
        except Exception:  # noqa: BLE001 - reported as the failure it is
            import traceback

            code = "uncaught"
            out.write(traceback.format_exc())
    return code, out.getvalue()


@pytest.fixture
def in_tiny_registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setitem(_registry._REGISTRY, "tiny", TINY)
    monkeypatch.chdir(tmp_path)  # default output folders land here
    return tmp_path


CASES = itertools.count()


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_every_command_line_succeeds_or_gives_one_clear_error(data, inputs, in_tiny_registry):
    argv = data.draw(command_lines(inputs))
    if argv[0] in (
        "simulate",
        "measure",
        "run",
        "probe",
        "paths",
        "qk-rank",
        "compare",
        "reproduce",
    ):
        argv += ["--out", str(in_tiny_registry / f"out-{next(CASES)}")]
    code, printed = run_cli(argv, in_tiny_registry)
    shown = f"rankcollapse {' '.join(argv)} -> {code}:\n{printed[-1500:]}"
    assert code in (0, 2), shown
    assert "Traceback" not in printed, shown
    if code == 2:
        errors = [line for line in printed.splitlines() if "error:" in line]
        assert len(errors) == 1, shown


SIZE_FLAGS = ["--n-layers", "--n-heads", "--d-model", "--n-tokens", "--n-samples",
              "--batch-size", "--n-paths"]  # fmt: skip
SIZES = ["-1", "0", "1", "2", "100000000", "1000000000", "18446744073709551617"]


def _outs(folder: Path, inputs: dict[str, Path]) -> list[str]:
    return [str(folder / f"out-{next(CASES)}"), str(inputs["text"]), str(inputs["text"] / "sub"),
            "/dev/null", str(folder / ("x" * 300)), str(inputs["empty"])]  # fmt: skip


@st.composite
def plot_training_lines(draw: st.DrawFn, inputs: dict[str, Path], folder: Path) -> list[str]:
    # A binary log and a folder named like one are the monitor reader's own cases (its checked,
    # bounded reader of logs); they join this pool when it lands.
    logs = ["collapse", "collapse", "not-a-log", "missing", "text"]
    files = draw(st.lists(st.sampled_from(logs), min_size=1, max_size=3))
    argv = ["plot-training", *(str(inputs[name]) for name in files)]
    if draw(st.booleans()):
        metric = ["res_comp_rel", "mu_rel", "stable_rank", "nope", "../x", "", "attn_entropy"]
        argv += ["--metric", draw(st.sampled_from(metric))]
    return [*argv, "--out", draw(st.sampled_from(_outs(folder, inputs)))]


@st.composite
def size_lines(draw: st.DrawFn, inputs: dict[str, Path], folder: Path) -> list[str]:
    command = draw(st.sampled_from(["simulate", "probe", "paths decompose", "paths products",
                                    "paths count"]))  # fmt: skip
    known = {a for o in fuzzable(PARSERS[command]) for a in o.option_strings}
    argv = [*command.split(), *base_argv(command, inputs)]
    for flag in draw(st.lists(st.sampled_from([f for f in SIZE_FLAGS if f in known]),
                              min_size=1, max_size=3)):  # fmt: skip
        argv += [flag, draw(st.sampled_from(SIZES))]
    if command in ("simulate", "probe"):
        argv.append("--no-figures")
    return [*argv, "--out", str(folder / f"out-{next(CASES)}")]


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_plot_training_and_size_flags_succeed_or_give_one_clear_error(
    data, inputs, in_tiny_registry
):
    lines = st.one_of(plot_training_lines(inputs, in_tiny_registry),
                      size_lines(inputs, in_tiny_registry))  # fmt: skip
    argv = data.draw(lines)
    code, printed = run_cli(argv, in_tiny_registry)
    shown = f"rankcollapse {' '.join(argv)} -> {code}:\n{printed[-1500:]}"
    assert code in (0, 2), shown
    assert "Traceback" not in printed, shown
    if code == 2:
        errors = [line for line in printed.splitlines() if "error:" in line]
        assert len(errors) == 1, shown
    assert sorted(p.name for p in inputs["collapse"].parent.glob("training-*")) == [], shown
